"""site.yml end to end on the lab: provisions, trains across every node, gathers every rank's results."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchrunner import report, results, summary
from lab import PROJECT, lab_node_names, run_site

RESULTS = PROJECT / "results"
BENCHMARK_PLAY_PREFIX = "Benchmark"
HEAD = "lab-head"
HOROVODRUN_RUN = "e2e-horovodrun"


@pytest.fixture(scope="module")
def latest_summary(first_run):
    return results.load(results.SUMMARY, RESULTS / summary.LATEST / summary.SUMMARY_JSON)


def test_two_ranks_on_two_hosts(latest_summary):
    assert latest_summary["ranks"] == 2
    assert len(latest_summary["hosts"]) == 2
    assert {r["host"] for r in latest_summary["throughput"]["per_rank"]} == set(latest_summary["hosts"])


def test_throughput_is_the_sum_of_positive_per_rank_rates(latest_summary):
    per_rank = [r["samples_per_sec"] for r in latest_summary["throughput"]["per_rank"]]
    assert all(rate > 0 for rate in per_rank)
    assert latest_summary["throughput"]["total_per_sec"] == pytest.approx(sum(per_rank))


def test_run_passed_its_sanity_checks(latest_summary):
    assert latest_summary["sanity"]["passed"], latest_summary["sanity"]["checks"]
    assert len(latest_summary["loss"]["rank0"]) == (latest_summary["workload"]["warmup_steps"]
                                                    + latest_summary["workload"]["measured_steps"])


def test_every_rank_file_reached_the_control_host(latest_summary):
    run_dir = (RESULTS / summary.LATEST).resolve()
    assert run_dir.name == latest_summary["run_id"]
    raw = sorted((run_dir / summary.RAW_DIR).glob("rank-*.json"))
    assert [p.name for p in raw] == ["rank-00000.json", "rank-00001.json"]
    assert (run_dir / report.REPORT_MD).read_text().startswith(f"# Run {latest_summary['run_id']}")
    assert (run_dir / report.REPORT_HTML).is_file() and (run_dir / report.PLOTS_DIR / "loss.png").is_file()


def test_the_resolved_job_and_what_its_launcher_left_are_kept_and_linked(latest_summary):
    run_dir = (RESULTS / summary.LATEST).resolve()
    job = results.load(results.JOB, run_dir / "job.json")
    assert job["resolved"] is True and job["launcher"] == "srun" and job["run_id"] == latest_summary["run_id"]
    # srun's LEAVES, the list the play fetched, is the list the report links.
    assert (run_dir / "job.sbatch").is_file()
    assert "job: [job.json](job.json) · [job.sbatch](job.sbatch)" in (run_dir / report.REPORT_MD).read_text()


def test_provenance_names_the_stack_and_versions(latest_summary):
    # The lab has a Slurm controller, so the default run is a batch job whose ranks srun started through PMIx.
    assert latest_summary["stack"] == "slurm"
    assert latest_summary["launcher"] == "srun"
    assert latest_summary["versions"]["tensorflow"] == "2.15.1"
    assert latest_summary["versions"]["horovod"] == "0.28.1"
    assert latest_summary["versions"]["mpi"].startswith("Open MPI")
    assert latest_summary["provenance"]["horovod"]["mpi_built"] is True


def on(host: str, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["podman", "exec", "-i", host, *argv], input=stdin, check=True, capture_output=True,
                          text=True).stdout


def on_head(*argv: str) -> str:
    return on(HEAD, *argv)


def test_slurm_has_every_node_idle_and_runs_steps_across_them(first_run):
    nodes = lab_node_names()
    states = on_head("sinfo", "--noheader", "--Node", "--format=%N %t").split("\n")
    assert sorted(line for line in states if line) == [f"{node} idle" for node in nodes]
    assert sorted(on_head("timeout", "60", "srun", f"--nodes={len(nodes)}", "hostname").split()) == nodes


def provisioned_records() -> dict[str, dict[str, str]]:
    """What each lab host was last provisioned with (roles/provisioned), as the host holds it."""
    return {host: json.loads(on(host, "cat", "/etc/ansible/facts.d/hpcml_provisioned.fact"))
            for host in [HEAD, *lab_node_names()]}


# Before the tests below change the cluster's inputs (the MUNGE key): the hosts are as the first run left them. The
# second run's benchmark goes through horovodrun (a benchrunner_* setting, none of the provisioning inputs), so the one
# run shows both that provisioning is left out and that Horovod's own launcher trains the same workload.
def test_a_second_run_leaves_provisioned_hosts_out_and_trains_again_through_horovodrun(first_run):
    before = provisioned_records()
    default = results.load(results.SUMMARY, RESULTS / summary.LATEST / summary.SUMMARY_JSON)
    assert all(record["digest"] and record["stack"] == "baremetal" for record in before.values()), before
    second = run_site(extravars={"benchrunner_launcher": "horovodrun", "benchrunner_run_id": HOROVODRUN_RUN,
                                 "benchrunner_overwrite": True})
    assert second.ok, second.failures
    provisioning = [c for c in second.changes if not c.play.startswith(BENCHMARK_PLAY_PREFIX)]
    assert provisioning == []
    # Every host was current, so none went through the provisioning plays and none was recorded again.
    assert provisioned_records() == before
    # The benchmark itself runs again and reports a new run, started by horovodrun, of the first run's workload.
    assert any(c.play.startswith(BENCHMARK_PLAY_PREFIX) for c in second.changes)
    document = results.load(results.SUMMARY, RESULTS / HOROVODRUN_RUN / summary.SUMMARY_JSON)
    assert (document["launcher"], document["ranks"], document["sanity"]["passed"]) == ("horovodrun", 2, True)
    assert document["workload"] == default["workload"] and default["launcher"] == "srun"


# Check mode goes through every task on every host, whatever the records say: it is how drift by hand is seen.
def test_check_mode_sees_a_node_changed_by_hand_and_nothing_else(first_run):
    node = lab_node_names()[0]
    mca = "/etc/openmpi/openmpi-mca-params.conf"
    original = on(node, "cat", mca)
    on(node, "sh", "-c", f"echo 'btl_tcp_if_include = lo' >> {mca}")
    try:
        outcome = run_site(check=True)
    finally:
        on(node, "sh", "-c", f"cat > {mca}", stdin=original)
    assert outcome.ok, outcome.failures
    assert [(c.host, c.task) for c in outcome.changes] == [(node, "Write the system-wide MCA parameters")]


def test_a_lost_munge_key_and_a_node_drained_for_its_hardware_come_back_with_a_rerun(first_run):
    # Two faults an admin fixes with the same rerun of the slurm plays: the cluster key lost on the control host, and
    # configured memory above what the nodes have (what Slurm sees when a node loses DIMMs).
    key = PROJECT / "inventory" / "lab" / "credentials" / "munge.key"
    old = key.read_bytes()
    key.unlink()
    try:
        drained = run_site(tags="slurm", extravars={"slurm_memory_reserve_mb": -4096, "slurm_wait_timeout_s": 15})
        assert not drained.ok
        assert any("Low RealMemory" in failure for failure in drained.failures), drained.failures
    finally:
        # Slurm 22.05 marks such nodes inval; rewritten from slurmd -C, their definitions fit and they come back.
        # Run whatever happened above, so that the tests after this one get a working Slurm.
        fixed = run_site(tags="slurm")
    assert fixed.ok, fixed.failures
    # A new key, made once and installed everywhere by the first rerun, before it met the drained nodes. A no_log
    # task's change is known from the recap (playbooks.Progress), not from its censored result.
    assert key.read_bytes() != old and key.stat().st_mode & 0o777 == 0o600
    installed = {c.host for c in drained.changes if c.task == "Install the cluster key"}
    assert installed == {HEAD, *lab_node_names()}
    assert not [c for c in fixed.changes if c.task == "Install the cluster key"]
    states = on_head("sinfo", "--noheader", "--Node", "--format=%N %t").split("\n")
    assert sorted(line for line in states if line) == [f"{node} idle" for node in lab_node_names()]
    # The role's own check decoded every host's credential on one host; Slurm authenticates with the new key.
    assert on_head("timeout", "60", "srun", "--nodes=1", "true") == ""


NODE_LAYER_ROLES = ["nvidia_repo", "nvidia_driver", "rdma", "gpudirect", "nvidia_fabricmanager", "cuda_toolkit"]


@pytest.fixture(scope="module")
def node_validation(first_run):
    return results.load(results.NODE_VALIDATION, RESULTS / "node-validation" / "latest.json")


def test_node_layer_skips_every_hardware_step_with_its_reason(node_validation):
    assert sorted(node_validation["nodes"]) == ["lab-node1", "lab-node2"]
    for name, node in node_validation["nodes"].items():
        for role in NODE_LAYER_ROLES:
            state = node["roles"][role]
            assert state["steps"] == "skip", (name, role)
            assert state["reason"], (name, role)
        assert node["roles"]["nvidia_driver"]["reason"].startswith("no NVIDIA GPU found on the PCI bus")
        assert node["roles"]["rdma"]["reason"].startswith("no RDMA adapter found on the PCI bus")
        # The Kubernetes-only role does not run on the bare-metal stack at all.
        assert "nvidia_container_toolkit" not in node["roles"]


# What the node layer's roles would have put on a GPU node (the image node of molecule's node_layer scenario has it all).
NODE_LAYER_FILES = ["/etc/apt/sources.list.d/nvidia-cuda.sources", "/etc/modprobe.d/blacklist-nouveau.conf",
                    "/etc/profile.d/cuda.sh", "/etc/systemd/system/nvidia-peermem.service"]
NODE_LAYER_PACKAGES = ("nvidia-", "libnvidia-", "libcuda", "cuda-", "libcudnn", "libnccl", "perftest")


def test_a_node_without_gpus_gets_nothing_of_the_node_layer(first_run):
    for node in lab_node_names():
        records = {role: json.loads(on(node, "cat", f"/etc/ansible/facts.d/hpcml_{role}.fact")) for role in NODE_LAYER_ROLES}
        assert all(record["steps"] == "skip" for record in records.values()), (node, records)
        assert records["nvidia_driver"]["packages"] == [] and records["cuda_toolkit"]["versions"] == []
        assert records["nvidia_fabricmanager"]["nvswitches"] == 0
        gpudirect = records["gpudirect"]
        assert (gpudirect["route"], gpudirect["peermem"], gpudirect["ready"]) == (None, False, False)
        listed = on(node, "dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n").splitlines()
        installed = [line.split()[1] for line in listed if line.startswith("ii ")]
        assert [package for package in installed if package.startswith(NODE_LAYER_PACKAGES)] == [], node
        assert on(node, "sh", "-c", f"ls -d {' '.join(NODE_LAYER_FILES)} 2>/dev/null || true") == "", node


def test_validation_summary_says_what_it_could_not_check_and_why(node_validation):
    assert node_validation["status"] == "pass"
    assert node_validation["cluster"]["versions_uniform"] == {"status": "skip", "reason": "no node has an NVIDIA GPU"}
    assert node_validation["cluster"]["ib_write_bw_pair"]["reason"] == "fewer than two nodes have an active RDMA port"
    for node in node_validation["nodes"].values():
        checks = node["checks"]
        assert checks["nvidia_smi"]["status"] == "skip"
        assert checks["ib_ports_active"]["status"] == "skip"
        assert checks["peermem_loaded"]["reason"] == "no NVIDIA GPU on this node"
        assert checks["reboot_pending"]["status"] == "pass"
    # Only reboot_pending ran, on each node. The lab's inventory expects neither GPUs nor RDMA (node_checks_expect),
    # so that is a pass, and the verdict counts what did not run.
    assert node_validation["counts"] == {"total": 14, "ran": 2, "passed": 2, "failed": 0, "skipped": 12}
    for node in node_validation["nodes"].values():
        assert (node["verdict"]["status"], node["verdict"]["expected"], node["verdict"]["counts"]["ran"]) == ("pass", [], 1)


def test_acceptance_skips_every_gpu_check_and_measures_the_lab_pair_through_gloo(first_run, tmp_path):
    # Opted in on the lab: no GPU, so nothing is built or run on a GPU and each GPU input says which fact says so; the
    # pair's allreduce goes through Gloo on the CPUs, measured, with no hardware rate over veth to judge it against.
    outcome = run_site(playbook="playbooks/validate.yml", extravars={"node_acceptance_enabled": True,
                                                                     "node_checks_results_dir": str(tmp_path)})
    assert outcome.ok, outcome.failures
    document = results.load(results.NODE_VALIDATION, tmp_path / "latest.json")
    assert document["status"] == "pass"
    # Every GPU input skipped and the Gloo link measured but not judged: reboot_pending is still all that ran.
    assert (document["counts"]["ran"], document["counts"]["failed"]) == (2, 0)
    for name, node in document["nodes"].items():
        checks = node["acceptance"]["checks"]
        assert checks, name
        for check in checks.values():
            assert check["status"] == "skip", (name, check)
            assert check["reason"].startswith("ansible_facts.hpcml_gpu.present is false: no NVIDIA GPU found"), (name, check)
    [link] = document["links"]
    assert (link["a"], link["b"], link["test"], link["status"]) == ("lab-node1", "lab-node2", "all_reduce_gloo", "skip")
    assert link["busbw_gbs"] > 0 and link["limit_gbs"] is None and link["fraction"] is None
    assert link["reason"].startswith("no limit: eth0 on lab-node1 is a virtual interface"), link["reason"]
    assert document["actions"] == []
