"""The benchmark image running the MPIJob benchrunner renders, with the MPI Operator's part played by podman:
workers start sshd from the manifest's own command, the launcher runs the manifest's own command with the
operator's hostfile and SSH keys; every rank's result comes back through the launcher's log and summarizes
as a stack-k8s run. What Kubernetes itself does (scheduling, device plugins, the operator) is not in this test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchrunner import launchers, report, results, summary
from benchrunner.launchers import mpijob as k8s_launcher
from benchrunner.launchers.mpijob import submit
from benchrunner.workload import Workload

NETWORK = "hpcml-mpijob-emu"
NAMESPACE = "default"
# Fixed addresses stand in for the cluster DNS that resolves <pod>.<job>.<ns>.svc through the job's Service.
SUBNET = "10.89.77"
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
# Played as mpi-operator v0.8.1 does it, read from kubeflow/mpi-operator at v0.8.1,
# pkg/controller/mpi_job_controller.go (newSSHAuthSecret, setupSSHOnPod, newConfigMap, newWorker,
# newLauncherPodTemplate, the ompiEnvVars) and pkg/apis/kubeflow/v2beta1/constants.go.
# The Secret <job>-ssh, type kubernetes.io/ssh-auth: ssh-privatekey (ECDSA P-521, PEM "EC PRIVATE KEY") and
# ssh-publickey (authorized_keys format), mounted at sshAuthMountPath in the launcher and every worker with these
# items, defaultMode 0600 because the path is /root/.ssh.
SSH_ITEMS = {"id_rsa": "ssh-privatekey", "id_rsa.pub": "ssh-publickey", "authorized_keys": "ssh-publickey"}
# The ConfigMap <job>-config, mounted in the launcher only at /etc/mpi: hostfile 0444, discover_hosts.sh 0555.
CONFIG_MOUNT = "/etc/mpi"


def podman(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=check)


def worker_names(job: str, workers: int) -> list[str]:
    return [f"{job}-worker-{i}" for i in range(workers)]


def fqdn(host: str, job: str) -> str:
    """Pods get hostname <pod> and subdomain <job> (the job's headless Service): <pod>.<job>.<ns>.svc."""
    return f"{host}.{job}.{NAMESPACE}.svc"


def secret_volume(directory: Path, files: dict[str, str], mode: int) -> Path:
    """A directory laid out as kubelet writes a Secret or ConfigMap volume: the files in a timestamped folder
    reached through ..data, each item a link to ..data/<item>, the directory itself world-writable with the
    sticky bit (what sshd's StrictModes would refuse)."""
    stamp = directory / "..2026_01_01_00_00_00.000000000"
    stamp.mkdir(parents=True)
    for item, text in files.items():
        (stamp / item).write_text(text)
        (stamp / item).chmod(mode)
        (directory / item).symlink_to(f"..data/{item}")
    (directory / "..data").symlink_to(stamp.name)
    directory.chmod(0o1777)
    return directory


@pytest.fixture
def operator_wiring(tmp_path):
    """The -ssh Secret's volume, and a place for the -config ConfigMap's."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f",
                    str(tmp_path / "key")], check=True)
    keys = {"ssh-privatekey": (tmp_path / "key").read_text(), "ssh-publickey": (tmp_path / "key.pub").read_text()}
    ssh = secret_volume(tmp_path / "ssh", {item: keys[key] for item, key in SSH_ITEMS.items()}, 0o600)
    yield ssh, tmp_path
    remove_pods()


def pod_env(container: dict, node: str) -> list[str]:
    """The container's environment as kubelet gives it: plain values, and spec.nodeName from the downward API (the
    node each emulated pod runs on: one worker per node, as the manifest's anti-affinity asks)."""
    env = []
    for item in container["env"]:
        if "value" in item:
            env.append(f"{item['name']}={item['value']}")
        else:
            assert item["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}, f"no emulation of {item}"
            env.append(f"{item['name']}={node}")
    return env


def remove_pods() -> None:
    """One by one (a missing name must not keep the others), and whatever an interrupted run left."""
    names = podman("ps", "--all", "--format", "{{.Names}}", "--filter", "label=hpcml-e2e=mpijob", check=False)
    for name in names.stdout.split():
        # At once: the job is over, and waiting for each pod's sshd to take SIGTERM cost 7 s a pod.
        podman("rm", "--force", "--ignore", "--time", "0", name)
    podman("network", "rm", "--force", NETWORK, check=False)


# The founding framework on its CNN, and PyTorch pretraining the transformer with FSDP2 (DDP's ranks meet as FSDP's
# do: the launcher's part is the same).
@pytest.mark.parametrize(("framework", "settings", "versions"), [
    ("tensorflow-horovod", {"image_size": 32, "batch_size": 16}, {"tensorflow": "2.15.1", "horovod": "0.28.1"}),
    ("pytorch-fsdp", {"model": "llama-tiny", "sequence_length": 64, "batch_size": 4},
     {"torch": "2.13.0+cpu", "backend": "gloo"}),
])
def test_the_mpijob_trains_in_the_image_and_its_results_come_back_in_the_log(benchmark_image, operator_wiring, framework,
                                                                             settings, versions):
    ssh, tmp_path = operator_wiring
    run_id = f"e2e-mpijob-{framework}"
    workload = Workload.from_mapping({"framework": framework, **settings, "warmup_steps": 2, "measured_steps": 5})
    job = launchers.Job(run_id=run_id, output_dir=f"/tmp/benchrunner/{run_id}/raw", ranks=2,
                        stack="k8s", launcher="mpijob", network="overlay", workload=workload)
    manifest = k8s_launcher.mpijob_manifest(job, k8s_launcher.MPIJob.Settings(image=benchmark_image))
    name, spec = manifest["metadata"]["name"], manifest["spec"]
    specs = spec["mpiReplicaSpecs"]
    workers = worker_names(name, specs["Worker"]["replicas"])
    slots = spec["slotsPerWorker"]
    # newConfigMap: one line per worker, by FQDN, with slotsPerWorker; discover_hosts.sh lists the running ones.
    config = secret_volume(tmp_path / "config", {
        "hostfile": "".join(f"{fqdn(w, name)} slots={slots}\n" for w in workers),
        "discover_hosts.sh": "#!/bin/sh\n" + "".join(f"echo {fqdn(w, name)}\n" for w in workers)}, 0o444)
    (config / "..data" / "discover_hosts.sh").chmod(0o555)
    shm = specs["Worker"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]
    addresses = {host: f"{SUBNET}.{10 + i}" for i, host in enumerate([f"{name}-launcher", *workers])}
    # Pods also resolve <pod>.<job> through their search path (<namespace>.svc.<cluster domain>).
    hosts = [f"--add-host={alias}:{ip}" for host, ip in addresses.items()
             for alias in (fqdn(host, name), f"{host}.{name}")]
    common = ["--network", NETWORK, "--label", "hpcml-e2e=mpijob", *LIMITS, *hosts,
              "--shm-size", shm.removesuffix("i").lower(), "-v", f"{ssh}:{spec['sshAuthMountPath']}:ro,Z"]
    remove_pods()
    podman("network", "create", "--subnet", f"{SUBNET}.0/24", NETWORK)
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    for i, host in enumerate(workers):
        env = [*pod_env(worker, f"emulated-node-{i}"), "K_MPI_JOB_ROLE=worker"]
        podman("run", "-d", "--rm", "--name", host, "--hostname", host, "--ip", addresses[host], *common,
               *[arg for item in env for arg in ("-e", item)],
               "--entrypoint", worker["command"][0], benchmark_image, *worker["command"][1:])
    # WaitForWorkersReady: the launcher is created once every worker pod is Ready; with no readiness probe that is
    # its container running, not sshd listening (hence ConnectionAttempts=10 below).
    for host in workers:
        assert podman("inspect", "--format", "{{.State.Running}}", host).stdout.strip() == "true"
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    env = pod_env(launcher, "emulated-node-0")
    env += ["K_MPI_JOB_ROLE=launcher", "OMPI_MCA_orte_keep_fqdn_hostnames=true",
            f"OMPI_MCA_orte_default_hostfile={CONFIG_MOUNT}/hostfile", "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10",
            f"OMPI_MCA_orte_set_default_slots={slots}", "NVIDIA_VISIBLE_DEVICES=", "NVIDIA_DRIVER_CAPABILITIES="]
    run = podman("run", "--rm", "--name", f"{name}-launcher", "--hostname", f"{name}-launcher",
                 "--ip", addresses[f"{name}-launcher"], *common, "-v", f"{config}:{CONFIG_MOUNT}:ro,Z",
                 *[arg for item in env for arg in ("-e", item)],
                 "--entrypoint", launcher["command"][0], benchmark_image, *launcher["command"][1:], check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    run_dir = tmp_path / job.run_id
    written, missing = submit.write_collected(run.stdout + run.stderr, run_dir, run_dir / "raw",
                                              submit.expected_results(job.program, job.ranks))
    assert missing == [] and sorted(p.name for p in written) == ["rank-00000.json", "rank-00001.json"]
    document = summary.write(run_dir)
    assert document["sanity"]["passed"], document["sanity"]
    assert (document["ranks"], document["stack"], document["launcher"], document["network"]) == (2, "k8s", "mpijob",
                                                                                                 "overlay")
    assert document["hosts"] == workers
    assert {key: document["versions"][key] for key in versions} == versions
    assert document["workload"]["framework"] == framework
    results.load(results.SUMMARY, run_dir / summary.SUMMARY_JSON)
    assert (run_dir / submit.LAUNCHER_LOG).read_text().count(f" {report.per_sec(workload.unit)}") == 2
