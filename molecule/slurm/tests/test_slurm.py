"""Slurm on a head and a compute node: one MUNGE key, identical configuration, the node idle, jobs run on it with
PMIx ranks. Jobs across two nodes are the lab's (tests/e2e/test_site.py)."""

import json

import pytest
import testinfra

HEAD = "mol-slurm-head"
COMPUTE = ["mol-slurm-c1"]


@pytest.fixture(scope="module")
def cluster():
    """Every node of the scenario; the checks span nodes, so each runs once rather than per host."""
    return {name: testinfra.get_host(f"podman://{name}") for name in [HEAD, *COMPUTE]}


def test_munge_key_is_private_and_the_same_everywhere(cluster):
    sums = set()
    for node in cluster.values():
        key = node.file("/etc/munge/munge.key")
        assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400)
        assert node.service("munge").is_running
        sums.add(key.sha256sum)
    assert len(sums) == 1


def test_credentials_from_each_node_decode_on_another(cluster):
    for name in [HEAD, *COMPUTE]:
        credential = cluster[name].check_output("munge --no-input")
        other = cluster[COMPUTE[0] if name == HEAD else HEAD]
        decoded = other.run(f"echo {credential} | unmunge")
        assert decoded.rc == 0, decoded.stderr
        assert "STATUS:          Success (0)" in decoded.stdout


def test_configuration_is_identical_on_every_host(cluster):
    assert len({node.file("/etc/slurm/slurm.conf").sha256sum for node in cluster.values()}) == 1
    conf = cluster[HEAD].file("/etc/slurm/slurm.conf").content_string
    assert f"SlurmctldHost={HEAD}(" in conf
    assert "PartitionName=debug Nodes=mol-slurm-c1 Default=YES" in conf


def test_node_lines_are_what_each_slurmd_reports(cluster):
    conf = cluster[HEAD].file("/etc/slurm/slurm.conf").content_string
    for name in COMPUTE:
        reported = dict(kv.split("=", 1) for kv in cluster[name].check_output("slurmd -C").splitlines()[0].split())
        line = next(line for line in conf.splitlines() if line.startswith(f"NodeName={name} "))
        configured = dict(kv.split("=", 1) for kv in line.split())
        for field in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"):
            assert configured[field] == reported[field], field
        # The default reserve keeps 1 GiB for the OS.
        assert int(configured["RealMemory"]) == int(reported["RealMemory"]) - 1024


def test_daemons_run_where_they_belong(cluster):
    assert cluster[HEAD].service("slurmctld").is_running and cluster[HEAD].service("slurmctld").is_enabled
    assert not cluster[HEAD].package("slurmd").is_installed
    for name in COMPUTE:
        assert cluster[name].service("slurmd").is_running and cluster[name].service("slurmd").is_enabled


def test_compute_nodes_are_idle(cluster):
    states = cluster[HEAD].check_output("sinfo --noheader --Node --format='%N %t %P'").splitlines()
    assert sorted(states) == [f"{name} idle debug*" for name in COMPUTE]


def test_srun_runs_on_the_compute_node(cluster):
    out = cluster[HEAD].check_output("timeout 60 srun --nodes=1 --ntasks=1 hostname")
    assert out.split() == COMPUTE


def test_srun_gives_ranks_pmix(cluster):
    out = cluster[HEAD].check_output("cd /tmp && timeout 60 srun --mpi=pmix --nodes=1 --ntasks=2 printenv PMIX_RANK")
    assert sorted(out.split()) == ["0", "1"]


def test_record_says_why_jobs_are_not_confined(cluster):
    state = json.loads(cluster[COMPUTE[0]].file("/etc/ansible/facts.d/hpcml_slurm.fact").content_string)
    assert state["compute"] is True and state["gres"] is None
    conf = cluster[HEAD].file("/etc/slurm/slurm.conf").content_string
    if state["cgroup"]:
        assert "ProctrackType=proctrack/cgroup" in conf
    else:
        # Containers get read-only cgroup controllers on this host: the reason is recorded, not hidden.
        assert "cgroup" in state["reason"] and "read-only" in state["reason"]
        assert "ProctrackType=proctrack/linuxproc" in conf
