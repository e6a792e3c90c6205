"""The benchmark image running the MPIJob benchrunner renders, with the MPI Operator's part played by podman:
workers start sshd from the manifest's own command, the launcher runs the manifest's own command with the
operator's hostfile and SSH keys; every rank's result comes back through the launcher's log and summarizes
as a stack-k8s run. What Kubernetes itself does (scheduling, device plugins, the operator) is not in this test."""

from __future__ import annotations

import subprocess

import pytest

from benchrunner import launchers, mpijob, results, summary
from benchrunner.workload import Workload
from lab import PROJECT

IMAGE = "localhost/hpcml-benchrunner:cpu"
NETWORK = "hpcml-mpijob-emu"
WORKERS = ["emu-worker-0", "emu-worker-1"]
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]


def podman(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=check)


@pytest.fixture(scope="module")
def image():
    subprocess.run(["make", "--no-print-directory", "image", f"IMAGE={IMAGE}"], cwd=PROJECT, check=True,
                   capture_output=True)
    return IMAGE


@pytest.fixture
def operator_wiring(tmp_path):
    """What the MPI Operator gives the pods: one SSH key pair mounted in every pod, a hostfile in the launcher."""
    ssh = tmp_path / "ssh"
    ssh.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / "id_ed25519")], check=True)
    (ssh / "authorized_keys").write_text((ssh / "id_ed25519.pub").read_text())
    for key in ssh.iterdir():
        key.chmod(0o600)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{w} slots=1\n" for w in WORKERS))
    remove_pods()
    podman("network", "create", NETWORK)
    yield ssh, hostfile
    remove_pods()


def remove_pods() -> None:
    """One by one (a missing name must not keep the others), and whatever an interrupted run left."""
    for name in [*WORKERS, "emu-launcher"]:
        podman("rm", "--force", "--ignore", name)
    podman("network", "rm", "--force", NETWORK, check=False)


def test_the_mpijob_trains_in_the_image_and_its_results_come_back_in_the_log(image, operator_wiring, tmp_path):
    ssh, hostfile = operator_wiring
    job = launchers.Job(run_id="e2e-mpijob-image", output_dir="/tmp/benchrunner/e2e-mpijob-image/raw", ranks=2,
                        stack="k8s", launcher="mpijob", network="overlay",
                        workload=Workload(image_size=32, batch_size=16, warmup_steps=2, measured_steps=5))
    manifest = launchers.mpijob_manifest(job, image=image)
    specs = manifest["spec"]["mpiReplicaSpecs"]
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    for name in WORKERS:
        podman("run", "-d", "--rm", "--name", name, "--hostname", name, "--network", NETWORK, *LIMITS,
               "-v", f"{ssh}:/root/.ssh:Z", "--entrypoint", worker["command"][0], image, *worker["command"][1:])
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    env = [f"{e['name']}={e['value']}" for e in launcher["env"]]
    env += ["OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile", "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10"]
    run = podman("run", "--rm", "--name", "emu-launcher", "--network", NETWORK, *LIMITS,
                 "-v", f"{ssh}:/root/.ssh:Z", "-v", f"{hostfile}:/etc/mpi/hostfile:Z",
                 *[arg for item in env for arg in ("-e", item)],
                 "--entrypoint", launcher["command"][0], image, *launcher["command"][1:], check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    run_dir = tmp_path / job.run_id
    written = mpijob.write_collected(run.stdout + run.stderr, run_dir, run_dir / "raw")
    assert sorted(p.name for p in written) == ["rank-00000.json", "rank-00001.json"]
    document = summary.write(run_dir)
    assert document["sanity"]["passed"], document["sanity"]
    assert (document["ranks"], document["stack"], document["launcher"], document["network"]) == (2, "k8s", "mpijob",
                                                                                                 "overlay")
    assert document["hosts"] == WORKERS
    assert document["versions"]["tensorflow"] == "2.15.1" and document["versions"]["horovod"] == "0.28.1"
    results.load(results.SUMMARY, run_dir / summary.SUMMARY_JSON)
    assert (run_dir / mpijob.LAUNCHER_LOG).read_text().count(" images/s") == 2
