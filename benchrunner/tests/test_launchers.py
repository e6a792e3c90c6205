import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchrunner import cli, launchers, rank_env, watchdog
from benchrunner.launchers import horovodrun, mpirun, srun, torchrun
from benchrunner.launchers import mpijob as k8s_launcher
from benchrunner.launchers.mpijob import checks as mpijob_checks
from benchrunner.workload import Workload

WORKLOAD = Workload.from_mapping({"model": "resnet50", "data": "tfrecord", "data_dir": "/data/cxr", "batch_size": 64,
                                  "image_size": 224, "precision": "mixed_float16", "fusion_threshold_mb": 32,
                                  "fp16_allreduce": True})


def job(**changes) -> launchers.Job:
    settings = {"run_id": "camp.train-resnet50.r1", "output_dir": "/var/lib/hpcml/results/r1/raw", "ranks": 6,
                "hosts": ("gpu1", "gpu2", "gpu3"), "gpus_per_node": 4, "workload": WORKLOAD,
                "benchrunner": "/opt/hpcml/venv/bin/benchrunner", "env": (("NCCL_DEBUG", "INFO"),),
                "git_commit": "abc"}
    settings.update(changes)
    return launchers.Job(**settings)


def rank_program(argv: list[str]) -> list[str]:
    return argv[argv.index("/opt/hpcml/venv/bin/benchrunner") + 1:]


def parsed(argv: list[str]):
    return cli.build_parser().parse_args(rank_program(argv))


def test_ranks_fill_hosts_slot_by_slot_and_only_the_hosts_needed():
    assert launchers.hostfile(job()) == "gpu1 slots=4\ngpu2 slots=2\n"
    assert launchers.hostfile(job(ranks=3, gpus_per_node=0)) == "gpu1 slots=1\ngpu2 slots=1\ngpu3 slots=1\n"


def test_mpirun_exports_the_network_settings_and_the_users_environment():
    argv = mpirun.argv(job(network="rdma"), "/run/hostfile")
    assert argv[:5] == ["mpirun", "-np", "6", "--hostfile", "/run/hostfile"]
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert exported == ["BENCHRUNNER_LAUNCHED_AT", "PATH", "BENCHRUNNER_GPU=1", "NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=0",
                        "NCCL_NET_GDR_LEVEL=PHB"]


def test_user_environment_overrides_the_network_defaults():
    assert job(network="tcp", env=(("NCCL_IB_DISABLE", "0"),)).environment() == {"NCCL_IB_DISABLE": "0",
                                                                                "BENCHRUNNER_GPU": "1"}


def test_the_job_tells_every_rank_whether_it_asked_for_a_gpu():
    assert job(gpus_per_node=4).environment()[rank_env.GPU_ENV] == "1"
    assert job(gpus_per_node=0, hosts=("a", "b", "c", "d", "e", "f")).environment()[rank_env.GPU_ENV] == "0"
    # Not the user's to override: sanity reads it as what the job asked.
    assert job(env=(("BENCHRUNNER_GPU", "0"),)).environment()[rank_env.GPU_ENV] == "1"


def test_horovodrun_places_ranks_with_host_slots_and_sees_no_rank_options():
    argv = horovodrun.argv(job(launcher="horovodrun"))
    assert argv == ["horovodrun", "-np", "6", "-H", "gpu1:4,gpu2:2", "/opt/hpcml/venv/bin/benchrunner", "rank"]


def test_rank_runs_the_program_named_in_the_environment(monkeypatch):
    the_job = job(launcher="horovodrun")
    monkeypatch.setenv(rank_env.RANK_ARGV_ENV, horovodrun.environment(the_job)[rank_env.RANK_ARGV_ENV])
    seen = {}
    monkeypatch.setattr(cli, "cmd_train", lambda args: seen.setdefault("workload", Workload.from_args(args)) and 0)
    assert cli.main(["rank"]) == 0
    assert seen["workload"] == WORKLOAD


def test_rank_refuses_anything_but_a_rank_program(monkeypatch, capsys):
    monkeypatch.setenv(rank_env.RANK_ARGV_ENV, "deploy --check")
    assert cli.main(["rank"]) == 2
    assert "must hold 'train ...' or 'allreduce ...'" in capsys.readouterr().err


# An hour, its stall timeout the default: what a job document asks for unless it says otherwise.
LIMITS = watchdog.Limits(timeout_s=3600, stall_timeout_s=300)


def srun_command(script: str) -> list[str]:
    """The batch script's srun command: its last line, after the watchdog's command and its --."""
    watched = shlex.split(script.strip().splitlines()[-1])
    return watched[watched.index("--") + 1:]


def test_sbatch_script_asks_slurm_for_the_same_layout():
    script = srun.script(job(stack="slurm", launcher="srun"), LIMITS, partition="gpu", mpi="pmi2")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks=6", "#SBATCH --ntasks-per-node=4",
                 "#SBATCH --gpus-per-node=4", "#SBATCH --partition=gpu", "#SBATCH --nodelist=gpu1,gpu2",
                 "export NCCL_DEBUG=INFO"):
        assert line + "\n" in script
    command = srun_command(script)
    assert command[:3] == ["srun", "--mpi=pmi2", "--kill-on-bad-exit=1"]
    assert parsed(command).launcher == "srun" and parsed(command).stack == "slurm"


def test_sbatch_script_runs_srun_watched_on_the_batch_host_within_the_jobs_limits():
    # Paths with a space and a quote: each stays one word of the command.
    the_job = job(stack="slurm", launcher="srun", benchrunner="/opt/it's here/bin/benchrunner",
                  output_dir="/var/lib/hpc ml/results/r1/raw")
    script = srun.script(the_job, watchdog.Limits(3601, 42.5, 600))
    watched = shlex.split(script.strip().splitlines()[-1])
    assert watched[:watched.index("--")] == [
        "/opt/it's here/bin/benchrunner", "watch", "--run-id", "camp.train-resnet50.r1",
        "--run-dir", "/var/lib/hpc ml/results/r1", "--ranks", "6", "--timeout", "3601", "--stall-timeout", "42.5",
        "--startup-timeout", "600"]
    # The command the batch script runs is one the watch command takes, and it watches what srun starts: the same job.
    args = cli.build_parser().parse_args(watched[1:])
    assert (args.func, args.run_id, args.ranks, args.timeout, args.stall_timeout, args.startup_timeout,
            args.argv[:2]) == (cli.cmd_watch, the_job.run_id, 6, 3601, 42.5, 600, ["srun", "--mpi=pmix"])
    assert args.argv[args.argv.index("/opt/it's here/bin/benchrunner"):] == the_job.rank_argv()
    # The ranks beat (the launch time is exported), and Slurm's own limit is the timeout in minutes, rounded up, +1.
    assert f"export {rank_env.LAUNCHED_AT_ENV}=$(date +%s.%N)\n" in script
    assert "#SBATCH --time=62\n" in script
    assert "#SBATCH --time=61\n" in srun.script(job(stack="slurm", launcher="srun"), watchdog.Limits(3600, 300))


def test_sbatch_script_without_hosts_lets_slurm_place_the_job():
    assert "--nodelist" not in srun.script(job(stack="slurm", launcher="srun", hosts=()), LIMITS)


def test_srun_given_too_few_hosts_is_refused():
    with pytest.raises(ValueError, match="6 ranks at 4 per node need 2 hosts, 1 given"):
        job(stack="slurm", launcher="srun", hosts=("gpu1",)).validate()


@pytest.mark.parametrize("launcher", ["mpirun", "horovodrun", "srun", "mpijob"])
def test_every_launcher_hands_the_ranks_the_same_workload(launcher):
    stack = {"srun": "slurm", "mpijob": "k8s"}.get(launcher, "baremetal")
    the_job = job(launcher=launcher, stack=stack)
    if launcher == "mpirun":
        argv = mpirun.argv(the_job, None)
    elif launcher == "horovodrun":
        argv = ["/opt/hpcml/venv/bin/benchrunner", *shlex.split(
            horovodrun.environment(the_job)[rank_env.RANK_ARGV_ENV])]
    elif launcher == "srun":
        argv = srun_command(srun.script(the_job, LIMITS))
    else:
        manifest = k8s_launcher.mpijob_manifest(the_job, k8s_launcher.MPIJob.Settings(image="registry.local/benchrunner:1"))
        argv = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    args = parsed(argv)
    assert Workload.from_args(args) == WORKLOAD
    assert (args.run_id, args.launcher, args.stack, args.git_commit) == (the_job.run_id, launcher, stack, "abc")


def test_allreduce_jobs_run_the_sweep_with_its_sizes():
    args = parsed(mpirun.argv(job(program="allreduce", allreduce_max_bytes=1 << 20), None))
    assert (args.command, args.min_bytes, args.max_bytes) == ("allreduce", 8, 1 << 20)


@pytest.mark.parametrize(("changes", "message"), [
    ({"launcher": "srun"}, "launcher srun does not run on stack baremetal"),
    ({"hosts": ("gpu1",)}, "6 ranks at 4 per node need 2 hosts, 1 given"),
    ({"network": "carrier-pigeon"}, "network 'carrier-pigeon' is not one of"),
    ({"workload": Workload(model="alexnet")}, "model 'alexnet' is not one of"),
])
def test_invalid_jobs_are_explained(changes, message):
    with pytest.raises(ValueError, match=message):
        job(**changes).validate()


RDMA = "rdma/hca_shared"


def mpijob(network: str, **options):
    return k8s_launcher.mpijob_manifest(job(stack="k8s", launcher="mpijob", network=network),
                                        k8s_launcher.MPIJob.Settings(image="registry.local/benchrunner:1",
                                                                     rdma_resource=RDMA, **options))


@pytest.mark.parametrize("network", launchers.NETWORKS)
def test_mpijob_for_every_network_mode_validates_against_the_v2beta1_schema(network):
    mpijob_checks.validate_mpijob(mpijob(network, network_attachment="rdma-net", results_claim="results"))


def test_mpijob_golden_rdma():
    manifest = mpijob("rdma", network_attachment="default/rdma-net")
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == k8s_launcher.k8s_name("camp.train-resnet50.r1", 2)
    assert (spec["slotsPerWorker"], spec["mpiImplementation"], spec["runPolicy"]["cleanPodPolicy"]) == (4, "OpenMPI", "Running")
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    assert worker["template"]["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "default/rdma-net"}
    container = worker["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4, RDMA: 1}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert {"name": "NCCL_IB_DISABLE", "value": "0"} in container["env"]


def test_mpijob_golden_overlay_asks_for_gpus_only():
    worker = mpijob("overlay")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    container = worker["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert "securityContext" not in container and "annotations" not in worker["metadata"]
    assert {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in container["env"]


@pytest.mark.parametrize(("path", "value", "where"), [
    (("spec", "runPolicy", "cleanPodPolicy"), "Sometimes", "spec/runPolicy/cleanPodPolicy"),
    (("spec", "mpiImplementation"), "LAM", "spec/mpiImplementation"),
    (("metadata", "name"), "Not_A_DNS_Name", "metadata/name"),
])
def test_the_schema_catches_what_the_api_server_would_refuse(path, value, where):
    manifest = mpijob("tcp")
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=f"at {where}"):
        mpijob_checks.validate_mpijob(manifest)


def test_k8s_names_are_kept_when_valid_and_made_valid_otherwise():
    assert k8s_launcher.k8s_name("lab-train-r1", 2) == "lab-train-r1"
    name = k8s_launcher.k8s_name("Lab.Train_small_cnn.R1", 2)
    assert re.fullmatch(r"lab-train-small-cnn-r1-[0-9a-f]{8}", name)
    assert re.fullmatch(r"run-20261123t101500z-k8s-[0-9a-f]{8}", k8s_launcher.k8s_name("20261123T101500Z-k8s", 2))


def test_launch_dry_run_prints_what_it_would_start(capsys):
    assert cli.main(["launch", "--dry-run", "--run-id", "r", "--results-dir", "/tmp", "--ranks", "2",
                     "--hosts", "a,b", "--benchrunner", "/opt/hpcml/venv/bin/benchrunner",
                     "--measured-steps", "7"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[0] == "mpirun" and parsed(argv).measured_steps == 7


def test_launch_refuses_too_few_hosts(capsys):
    assert cli.main(["launch", "--dry-run", "--run-id", "r", "--results-dir", "/o", "--ranks", "3", "--hosts", "a,b"]) == 2
    assert "3 ranks at 1 per node need 3 hosts, 2 given" in capsys.readouterr().err


def stub(folder, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.mark.parametrize(("final", "rc", "said"), [
    ("JobState=COMPLETED Reason=None ExitCode=0:0", 0, ""),
    ("JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0", 3, "slurm job 42 ended FAILED (NonZeroExitCode)"),
    ("JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0", 1, "slurm job 42 ended NODE_FAIL (NodeDown)"),
])
def test_a_slurm_job_is_followed_at_a_steady_interval_until_it_ends(tmp_path, monkeypatch, capsys, final, rc, said):
    # Two polls see the job pending and running, the third its end: the caller waits for the job, not a backoff.
    stub(tmp_path, "sbatch", 'echo "$@" > "$0.args"; echo "42;cluster"\n')
    stub(tmp_path, "scontrol", f'''n=$(cat "$0.n" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.n"
case $n in 0) echo "JobId=42 JobState=PENDING Reason=Resources";; 1) echo "JobId=42 JobState=RUNNING";;
*) echo "JobId=42 {final}";; esac
''')
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    script = tmp_path / "job.sbatch"
    assert srun.submit_and_follow(script, poll_s=0.01) == rc
    assert (tmp_path / "sbatch.args").read_text().split() == ["--parsable", str(script)]
    assert (tmp_path / "scontrol.n").read_text().strip() == "3"
    out = capsys.readouterr()
    assert "Submitted batch job 42" in out.out
    assert said in out.err


def test_a_slurm_job_that_cannot_be_followed_fails_saying_why(tmp_path, monkeypatch, capsys):
    stub(tmp_path, "sbatch", 'echo 42\n')
    stub(tmp_path, "scontrol", 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert srun.submit_and_follow(tmp_path / "job.sbatch", poll_s=0.01) == 1
    assert "slurm job 42: scontrol cannot show it: slurm_load_jobs error: Invalid job id" in capsys.readouterr().err


def test_a_refused_submission_returns_sbatch_s_reason(tmp_path, monkeypatch, capsys):
    stub(tmp_path, "sbatch", 'echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert srun.submit_and_follow(tmp_path / "job.sbatch") == 1
    assert "invalid partition specified: gpu" in capsys.readouterr().err


def torch_job(**changes) -> launchers.Job:
    workload = Workload.from_mapping({"framework": "pytorch-ddp", "model": "resnet50", "image_size": 224,
                                      "batch_size": 64, "channels_last": True})
    return job(**{"launcher": "torchrun", "workload": workload, **changes})


def test_torchrun_starts_one_agent_per_node_meeting_at_the_first():
    agents = torchrun.commands(torch_job(hosts=("gpu1", "gpu2")))
    assert [host for host, _ in agents] == ["gpu1", "gpu2"]
    remote = shlex.split(agents[1][1][-1])
    assert agents[1][1][:5] == ["ssh", "-o", "BatchMode=yes", "gpu2", "--"]
    agent = remote[remote.index("/opt/hpcml/venv/bin/torchrun"):]
    assert agent[:8] == ["/opt/hpcml/venv/bin/torchrun", "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                         "--rdzv-endpoint=gpu1:29400", "--rdzv-id=camp.train-resnet50.r1", "--max-restarts=0",
                         "--no-python"]
    ranks = parsed(agent)
    assert (ranks.framework, ranks.launcher, ranks.channels_last) == ("pytorch-ddp", "torchrun", True)
    # The ranks' environment travels on the remote command line; torchrun itself says where rank 0 is.
    assert "NCCL_DEBUG=INFO" in remote and "BENCHRUNNER_GPU=1" in remote
    assert not any(word.startswith("MASTER_ADDR=") for word in remote)


def test_torchrun_runs_the_local_agent_without_ssh(monkeypatch):
    monkeypatch.setattr(torchrun.socket, "gethostname", lambda: "gpu1.cluster.example")
    agents = torchrun.commands(torch_job(hosts=("gpu1", "gpu2"), ranks=8))
    assert agents[0][1][0] == "/opt/hpcml/venv/bin/torchrun" and agents[1][1][0] == "ssh"


def test_torchrun_ends_the_job_when_one_agent_fails(tmp_path, monkeypatch, capsys):
    # Stand-ins: a torchrun that fails on the second node, and an ssh that runs the remote command here.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text('#!/bin/sh\ncase "$HOSTNAME_UNDER_TEST" in gpu2) exit 3;; esac\nsleep 30\n')
    (bin_dir / "ssh").write_text('#!/bin/sh\nhost=$3\nshift 4\nHOSTNAME_UNDER_TEST=$host exec sh -c "$*"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(torchrun.socket, "gethostname", lambda: "gpu1")
    monkeypatch.setattr(torchrun, "POLL_S", 0.05)
    job_ = torch_job(hosts=("gpu1", "gpu2"), benchrunner=str(bin_dir / "benchrunner"),
                     output_dir=str(tmp_path / "run" / "raw"))
    assert launchers.get("torchrun").start(job_, torchrun.Torchrun.Settings(), launchers.Options(), LIMITS) == 3
    assert "torchrun agent on gpu2 exited 3" in capsys.readouterr().err


@pytest.mark.parametrize(("launcher", "framework", "message"), [
    ("torchrun", "tensorflow-horovod", "launcher torchrun does not start tensorflow-horovod ranks"),
    ("horovodrun", "pytorch-ddp", "launcher horovodrun does not start pytorch-ddp ranks"),
])
def test_a_launcher_refuses_a_framework_it_cannot_start(launcher, framework, message):
    with pytest.raises(ValueError, match=message):
        job(launcher=launcher, workload=Workload(framework=framework)).validate()


@pytest.mark.parametrize("launcher", ["mpirun", "srun"])
def test_pytorch_ranks_started_directly_learn_where_rank_0_is(launcher):
    environment = torch_job(launcher=launcher, stack="slurm").environment()
    assert (environment["MASTER_ADDR"], environment["MASTER_PORT"]) == ("gpu1", "29500")


def test_slurm_tells_pytorch_ranks_the_first_node_it_chose():
    script = srun.script(torch_job(launcher="srun", stack="slurm", hosts=()), LIMITS)
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert "export MASTER_PORT=29500" in script


def test_an_mpijob_tells_pytorch_ranks_worker_0s_name():
    job_ = torch_job(launcher="mpijob", stack="k8s", hosts=())
    name = k8s_launcher.k8s_name(job_.run_id, job_.nodes)
    assert job_.environment()["MASTER_ADDR"] == f"{name}-worker-0.{name}"
    manifest = k8s_launcher.mpijob_manifest(job_, k8s_launcher.MPIJob.Settings(image="benchrunner:test"))
    env = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "MASTER_ADDR", "value": f"{name}-worker-0.{name}"} in env


def torchrun_under_slurm(**changes) -> launchers.Job:
    return torch_job(**{"stack": "slurm", "ranks": 4, "gpus_per_node": 2, "hosts": (), **changes})


def test_torchrun_under_slurm_starts_one_agent_per_node_through_srun():
    script = torchrun.script(torchrun_under_slurm(), LIMITS, partition="gpu")
    # The allocation holds one Slurm task per node, each node's GPUs for its agent's ranks.
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=2",
                 "#SBATCH --partition=gpu", "#SBATCH --exclusive", "export NCCL_DEBUG=INFO", "export BENCHRUNNER_GPU=1"):
        assert line + "\n" in script
    assert "--nodelist" not in script and "MASTER_ADDR" not in script
    command = srun_command(script)
    at = command.index("/opt/hpcml/venv/bin/torchrun")
    assert command[:at] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    agent = command[at:]
    assert agent[:8] == ["/opt/hpcml/venv/bin/torchrun", "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                         "--rdzv-endpoint=${BENCHRUNNER_RDZV_HOST}:29400", "--rdzv-id=camp.train-resnet50.r1",
                         "--max-restarts=0", "--no-python"]
    ranks = parsed(agent)
    assert (ranks.framework, ranks.launcher, ranks.stack, ranks.channels_last) == (
        "pytorch-ddp", "torchrun", "slurm", True)
    # Watched on the batch host like srun's, for every rank torchrun starts.
    watched = shlex.split(script.strip().splitlines()[-1])
    assert watched[:watched.index("--")] == [
        "/opt/hpcml/venv/bin/benchrunner", "watch", "--run-id", "camp.train-resnet50.r1", "--run-dir",
        "/var/lib/hpcml/results/r1", "--ranks", "4", "--timeout", "3600", "--stall-timeout", "300",
        "--startup-timeout", "300"]
    assert f"export {rank_env.LAUNCHED_AT_ENV}=$(date +%s.%N)\n" in script and "#SBATCH --time=61\n" in script


def test_torchrun_under_slurm_meets_at_the_allocations_first_node(tmp_path):
    # The script as bash runs it, with stand-ins: scontrol lists the allocation's nodes (sorted, as Slurm does, not as
    # the job named them), the watchdog runs the command after its options, and srun prints it, one word a line.
    for name in ("scontrol", "srun"):
        stub(tmp_path, name, 'printf "%s\\n" node07 node08\n' if name == "scontrol" else 'printf "%s\\n" srun "$@"\n')
    stub(tmp_path, "benchrunner", 'while [ "$1" != -- ]; do shift; done; shift; exec "$@"\n')
    script = torchrun.script(torchrun_under_slurm(benchrunner=str(tmp_path / "benchrunner"), hosts=("node08", "node07")),
                             LIMITS)
    assert "#SBATCH --nodelist=node08,node07\n" in script
    ran = subprocess.run(["bash", "-c", script], env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
                                                      "SLURM_JOB_NODELIST": "node[07-08]"},
                         capture_output=True, text=True, check=True)
    words = ran.stdout.splitlines()
    assert words[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert "--rdzv-endpoint=node07:29400" in words


def test_torchrun_under_slurm_runs_as_many_ranks_on_every_node():
    with pytest.raises(ValueError, match="torchrun under Slurm starts the same number of ranks on every node: 3 ranks "
                                         "at 2 per node would leave 1 of the last node's slots empty"):
        torchrun.script(torchrun_under_slurm(ranks=3), LIMITS)
    # Fewer ranks than one node's slots: one node, all of them.
    assert "--nproc-per-node=1" in srun_command(torchrun.script(torchrun_under_slurm(ranks=1), LIMITS))


def test_torchrun_under_slurm_is_started_with_the_jobs_limits_and_its_settings(tmp_path, capsys):
    the_job = torchrun_under_slurm()
    # execute hands it the limits, and the launching node does not watch it (the ranks' output is not here).
    settings = torchrun.Torchrun.Settings(partition="gpu", rdzv_port=29411)
    assert launchers.execute(the_job, settings, launchers.Options(dry_run=True), LIMITS) == 0
    script = capsys.readouterr().out
    assert script == torchrun.script(the_job, LIMITS, partition="gpu", rdzv_port=29411)
    assert "#SBATCH --partition=gpu" in script and '--rdzv-endpoint="${BENCHRUNNER_RDZV_HOST}:29411"' in script


def test_launch_dry_run_prints_torchruns_batch_script_under_slurm(capsys):
    assert cli.main(["launch", "--dry-run", "--launcher", "torchrun", "--stack", "slurm", "--framework", "pytorch-ddp",
                     "--run-id", "r", "--results-dir", "/tmp", "--ranks", "2", "--benchrunner",
                     "/opt/hpcml/venv/bin/benchrunner", "--measured-steps", "4"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2\n" in script
    command = srun_command(script)
    assert command[:3] == ["srun", "--nodes=2", "--ntasks-per-node=1"] and "--nproc-per-node=1" in command
    assert parsed(command).measured_steps == 4 and parsed(command).launcher == "torchrun"


def test_torchruns_ranks_under_slurm_pass_the_launcher_check():
    # What a rank finds: torchrun's variables, and those of srun's task its agent is (one task per node).
    environ = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "SLURM_PROCID": "1",
               "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "1"}
    source = rank_env.variables_source(environ)
    assert source == "torchrun"
    assert launchers.launcher_problem(source, "torchrun", "pytorch-ddp") is None
    # It beats as torchrun's rank 3, not as Slurm's task 1.
    assert watchdog.rank_of(environ) == 3
    # srun's ranks find only Slurm's; a rank recording torchrun that found them was not started by torchrun.
    slurm_only = {k: v for k, v in environ.items() if k.startswith("SLURM_")}
    assert "found slurm's variables" in launchers.launcher_problem(rank_env.variables_source(slurm_only), "torchrun",
                                                                   "pytorch-ddp")


TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
BEATING_RANK = "from benchrunner import watchdog\nwith watchdog.beating(True):\n    watchdog.advance()\n"


def test_torchrun_passes_its_ranks_beats_on_to_its_own_output():
    # torchrun's workers inherit its stdout unless --redirects or --tee is given, so the watchdog around srun (or over
    # the agents on bare metal) reads every rank's beats in its output.
    ran = subprocess.run([TORCHRUN, "--standalone", "--nnodes=1", "--nproc-per-node=2", "--max-restarts=0",
                          "--no-python", sys.executable, "-c", BEATING_RANK], capture_output=True, text=True,
                         timeout=120, check=True)
    beats = [beat for beat in map(watchdog.parse, ran.stdout.splitlines()) if beat]
    assert {(beat.rank, beat.progress, beat.done) for beat in beats if beat.done} == {(0, 1, True), (1, 1, True)}
