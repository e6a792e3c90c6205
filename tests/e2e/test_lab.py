"""The lab comes back cleanly after a partial failure (a node lost, the pinned host keys gone), and nodes that
cannot resolve each other's names stop the lab and molecule with the reason, before anything else changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab import PROJECT, lab_node_names, run_site

LAB_PLAYBOOK = "playbooks/lab.yml"
LAB_IMAGE = "localhost/hpcml-lab-node:bookworm"
NO_DNS = "hpcml-nodns"
NO_DNS_SUBNET = "10.89.99.0/24"
NO_DNS_NODES = [f"{NO_DNS}-a", f"{NO_DNS}-b"]
# At or below the host's, as the lab's nodes (lab_ulimits).
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]


def podman(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=check)


def lab_containers(lab_name: str) -> list[str]:
    """The containers of one lab (the lab role labels each with its lab's name), and those named for it."""
    labelled = podman("ps", "--all", "--format", "{{.Names}}", "--filter", f"label=hpcml.lab={lab_name}").stdout.split()
    named = [n for n in podman("ps", "--all", "--format", "{{.Names}}").stdout.split() if n.startswith(f"{lab_name}-node")]
    return sorted(set(labelled + named))


def remove_no_dns() -> None:
    for name in NO_DNS_NODES:
        podman("rm", "--force", "--ignore", "--time", "0", name)
    podman("network", "rm", "--force", NO_DNS, check=False)


@pytest.fixture
def network_without_dns():
    """Two nodes on a network made as podman makes one when its DNS plugin is missing."""
    remove_no_dns()
    try:
        podman("network", "create", "--disable-dns", "--subnet", NO_DNS_SUBNET, NO_DNS)
        for name in NO_DNS_NODES:
            podman("--runtime", "runc", "run", "--detach", "--name", name, "--hostname", name, "--network", NO_DNS,
                   *LIMITS, LAB_IMAGE, "sleep", "600")
        yield NO_DNS_NODES
    finally:
        remove_no_dns()


def test_lab_recovers_a_lost_node_and_its_host_keys():
    nodes = lab_node_names()
    try:
        subprocess.run(["podman", "rm", "--force", nodes[-1]], check=True, capture_output=True)
        (PROJECT / ".lab" / "known_hosts").unlink()
    finally:
        # The recovery under test, run whatever happened above so that later tests find the lab whole.
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


def test_molecule_stops_when_its_nodes_cannot_resolve_each_other(network_without_dns):
    first, second = network_without_dns
    # The prepare playbook every multi-node scenario runs, with the platforms molecule would pass.
    outcome = run_site(playbook="molecule/shared/prepare.yml",
                       extravars={"molecule_yml": {"platforms": [{"name": n} for n in network_without_dns]}})
    assert not outcome.ok
    message = " ".join(outcome.failures)
    assert f"{first} cannot resolve {second}" in message
    assert f"{second} cannot resolve {first}" in message
    assert "golang-github-containernetworking-plugin-dnsname" in message


def test_lab_up_stops_on_a_network_without_dns_before_changing_anything(network_without_dns, tmp_path):
    # Only its own: molecule's scenarios may start and remove containers beside the e2e (make test).
    before = lab_containers(NO_DNS)
    outcome = run_site(playbook=LAB_PLAYBOOK, extravars={
        "lab_name": NO_DNS, "lab_subnet": NO_DNS_SUBNET, "lab_nodes": 1, "lab_head": False,
        "lab_node_prefix": f"{NO_DNS}-node", "lab_dir": str(tmp_path / "lab"),
        "lab_inventory_file": str(tmp_path / "hosts.yml")})
    assert not outcome.ok
    message = " ".join(outcome.failures)
    assert f"The lab network '{NO_DNS}' has no DNS" in message
    assert "`make lab-down`, then `make lab-up`" in message
    assert outcome.changes == []
    assert lab_containers(NO_DNS) == before
    assert not (tmp_path / "lab").exists()
    assert not (tmp_path / "hosts.yml").exists()
