"""Bad input stops site.yml on the lab in preflight, with a message naming the fix, before anything changes: what needs
the lab's own machines (two inventory names for one of them) and the whole run through ansible-runner. The settings
and inventories preflight refuses by themselves, among them more GPUs asked than a node has, are
tests/unit/test_preflight_play.py's, which runs the same play with the control host as the node, in seconds instead of
a lab run each. A passing preflight that changes nothing on the lab is test_site.py's second run, in which no play
but the benchmark's changes anything."""

from __future__ import annotations

import subprocess
import sys

import yaml

from lab import LAB_INVENTORY, PROJECT, run_site


def assert_stopped_in_preflight(outcome, expected: str) -> None:
    assert not outcome.ok
    assert any(expected in failure for failure in outcome.failures), outcome.failures
    assert outcome.changes == [], outcome.changes


def test_cli_reports_preflight_failure_through_ansible_runner():
    result = subprocess.run([sys.executable, "-m", "benchrunner", "deploy", "-e", "cluster_stack=nonsense"], cwd=PROJECT,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode != 0
    assert "Unknown stack 'nonsense'" in result.stderr
    assert "status: failed" in result.stderr


def test_two_inventory_names_for_one_machine(tmp_path):
    inventory = yaml.safe_load(LAB_INVENTORY.read_text())
    nodes = inventory["all"]["children"]["nodes"]["hosts"]
    first = sorted(nodes)[0]
    nodes["alias-of-node1"] = dict(nodes[first])
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    outcome = run_site(inventory=str(path))
    assert_stopped_in_preflight(outcome, f"alias-of-node1 and {first} are one machine (the same /etc/machine-id)")
    assert_stopped_in_preflight(outcome, f"alias-of-node1 and {first} answer to one hostname, {first}")
