"""The lab comes back cleanly after a partial failure: a node lost and the pinned host keys gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab import PROJECT, lab_node_names, run_site

LAB_PLAYBOOK = "playbooks/lab.yml"


def test_lab_recovers_a_lost_node_and_its_host_keys():
    nodes = lab_node_names()
    subprocess.run(["podman", "rm", "--force", nodes[-1]], check=True, capture_output=True)
    (PROJECT / ".lab" / "known_hosts").unlink()

    recovered = run_site(playbook=LAB_PLAYBOOK, extravars={"lab_nodes": len(nodes)})
    assert recovered.ok, recovered.failures
    assert lab_node_names() == nodes

    ping = subprocess.run([str(Path(sys.executable).parent / "ansible"), "nodes", "-m", "ansible.builtin.ping"],
                          cwd=PROJECT, capture_output=True, text=True, check=False)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == len(nodes)

    again = run_site(playbook=LAB_PLAYBOOK, extravars={"lab_nodes": len(nodes)})
    assert again.ok
    assert again.changes == []
