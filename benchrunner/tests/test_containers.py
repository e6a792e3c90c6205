"""Ranks in a container on the bare-metal stacks: each runtime's command line as its upstream release reads it, the
launchers that start ranks through it, every refusal, the image's digest at launch, the rank's check that it runs
where it says, and the record in rank results and summaries."""

from __future__ import annotations

import hashlib
import re
import shlex
from contextlib import nullcontext
from pathlib import Path

import pytest
from test_launcher_classes import PACKAGE, _name_comparisons

from benchrunner import cli, containers, job_document, launchers, results, summary, watchdog
from benchrunner.containers import apptainer, charliecloud, enroot
from benchrunner.launchers import mpirun, srun, torchrun
from benchrunner.workload import Workload
from documents import rank_document

DIGEST = "sha256:" + "ab" * 32
IMAGE = "/srv/hpcml/images/benchrunner.sqfs"
MOUNTS = ("/var/lib/hpcml/results", "/var/lib/hpcml/datasets/cxr", containers.SHM, containers.MACHINE_ID)
IMAGES = Workload.from_mapping({"model": "small_cnn", "data": "images", "data_dir": "/var/lib/hpcml/datasets/cxr"})
TORCH = Workload.from_mapping({"framework": "pytorch-ddp", "model": "small_cnn"})
# The nodes' benchrunner, apart from the image's (containers.IMAGE_BENCHRUNNER) to tell which runs where.
NODES_BENCHRUNNER = "/srv/hpcml/venv/bin/benchrunner"
LIMITS = watchdog.Limits(timeout_s=600, stall_timeout_s=120)
# Where each launcher starts ranks in each runtime (the launch item): srun in all three, Enroot only there
# (Pyxis); mpirun and torchrun in the two with a command to wrap; none of the others.
STARTS_IN = {"srun": {"charliecloud", "enroot", "apptainer"}, "mpirun": {"charliecloud", "apptainer"},
             "torchrun": {"charliecloud", "apptainer"}, "horovodrun": set(), "mpijob": set()}


def container(runtime: str = "charliecloud", **changes) -> containers.Container:
    return containers.Container(**{"runtime": runtime, "image": IMAGE, "digest": DIGEST, "mounts": MOUNTS, **changes})


def job(runtime: str = "charliecloud", **changes) -> launchers.Job:
    settings = {"run_id": "r1", "output_dir": "/var/lib/hpcml/results/r1/raw", "ranks": 4, "hosts": ("n1", "n2"),
                "gpus_per_node": 2, "workload": IMAGES, "benchrunner": NODES_BENCHRUNNER,
                "container": container(runtime)}
    settings.update(changes)
    return launchers.Job(**settings)


def rank_part(argv: list[str]):
    """The rank program's options, parsed as a rank parses them."""
    return cli.build_parser().parse_args(argv[argv.index(containers.IMAGE_BENCHRUNNER) + 1:])


def test_the_registry_holds_the_three_runtimes_each_one_module():
    assert containers.names() == ("apptainer", "charliecloud", "enroot")
    assert containers.choices() == ("none", "apptainer", "charliecloud", "enroot")
    assert {type(runtime).__module__ for runtime in containers.registry().values()} == {
        f"benchrunner.containers.{name}" for name in containers.names()}
    assert {name: set(launchers.get(name).containers) for name in launchers.names()} == STARTS_IN


def test_nothing_outside_the_runtimes_compares_with_a_runtimes_name():
    # The launchers start ranks through the runtime (declaring only which they can), never by naming one.
    names = set(containers.names())
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if PACKAGE / "containers" not in path.parents]
    assert PACKAGE / "launchers" / "srun.py" in modules
    assert [line for path in modules for line in _name_comparisons(path, PACKAGE, names)] == []


# ch-run 0.31's options that take a value (bin/ch-run.c, options[]), short and long.
CH_RUN_VALUED = {"-b", "--bind", "-c", "--cd", "--feature", "-g", "--gid", "--join-pid", "--join-ct", "--join-tag",
                 "-m", "--mount", "-s", "--storage", "-u", "--uid", "--unset-env"}


def ch_run(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """(binds, IMAGE, CMD) as ch-run 0.31's argp reads `ch-run [OPTION...] IMAGE -- CMD [ARG...]`."""
    assert argv[0] == "ch-run"
    binds, words = [], argv[1:]
    while words[0].startswith("-"):
        option, _, value = words.pop(0).partition("=")
        if option in CH_RUN_VALUED and not value:
            value = words.pop(0)
        if option in ("-b", "--bind"):
            binds.append(value)
    image = words.pop(0)
    assert words.pop(0) == "--"
    return binds, image, words


def test_charliecloud_runs_the_rank_with_ch_run_binding_each_mount_at_its_path():
    # Charliecloud 0.31: --bind=SRC binds SRC at the same path (SRC[:DST], DST defaulting to SRC); the same command
    # with or without GPUs (the image was prepared with ch-fromhost --nvidia).
    runtime = containers.get("charliecloud")
    argv = runtime.command(container(), ["/opt/hpcml/venv/bin/benchrunner", "train"], gpus=True)
    assert argv == runtime.command(container(), ["/opt/hpcml/venv/bin/benchrunner", "train"], gpus=False)
    binds, image, command = ch_run(argv)
    assert (binds, image, command) == (list(MOUNTS), IMAGE, ["/opt/hpcml/venv/bin/benchrunner", "train"])
    assert runtime.srun_task(container(), ["x"], gpus=False) == runtime.command(container(), ["x"], gpus=False)


def pyxis_mounts(option: str) -> list[tuple[str, str]]:
    """--container-mounts as Pyxis v0.20.0 parses it (args.c, parse_mount_option): entries split at ',', each
    SRC[:DST[:FLAGS]], DST defaulting to SRC."""
    value = option.removeprefix("--container-mounts=")
    return [(parts[0], parts[1] if len(parts) > 1 else parts[0]) for parts in (e.split(":") for e in value.split(","))]


def test_enroot_adds_pyxis_options_to_srun_and_starts_no_command_of_its_own():
    runtime = containers.get("enroot")
    task = runtime.srun_task(container("enroot"), ["/opt/hpcml/venv/bin/benchrunner", "train"], gpus=True)
    assert task[0] == f"--container-image={IMAGE}" and task[2:] == ["/opt/hpcml/venv/bin/benchrunner", "train"]
    assert pyxis_mounts(task[1]) == [(mount, mount) for mount in MOUNTS]
    with pytest.raises(ValueError, match="starts containers only through srun's options"):
        runtime.command(container("enroot"), ["x"], gpus=False)
    # Enroot 3.5.0's nvidia hook gives the GPUs only where NVIDIA_VISIBLE_DEVICES is set, CUDA only with `compute`.
    assert runtime.environment(gpus=True) == {"NVIDIA_VISIBLE_DEVICES": "all",
                                              "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    assert runtime.environment(gpus=False) == {}
    assert job("enroot", launcher="srun", stack="slurm").environment()["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "NVIDIA_VISIBLE_DEVICES" not in job("enroot", launcher="srun", stack="slurm", gpus_per_node=0).environment()


def test_apptainer_execs_the_rank_with_nv_only_for_gpus_and_one_bind_list():
    # Apptainer 1.3.6: apptainer exec [--nv] --bind SRC[,SRC...] IMAGE CMD [ARG...].
    runtime = containers.get("apptainer")
    gpu = runtime.command(container("apptainer"), ["b", "train"], gpus=True)
    assert gpu == ["apptainer", "exec", "--nv", "--bind", ",".join(MOUNTS), IMAGE, "b", "train"]
    assert runtime.command(container("apptainer"), ["b"], gpus=False) == [
        "apptainer", "exec", "--bind", ",".join(MOUNTS), IMAGE, "b"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"container": container("docker")}, "container runtime 'docker' is not one of apptainer, charliecloud, enroot"),
    ({"container": container("enroot")}, r"launcher mpirun cannot start ranks in enroot containers \(it starts them "
                                         r"in charliecloud, apptainer\)"),
    ({"launcher": "horovodrun"}, r"launcher horovodrun cannot start ranks in charliecloud containers \(it starts no "
                                 r"ranks in containers\)"),
    ({"container": container(image="images/benchrunner.sqfs")}, "container image 'images/benchrunner.sqfs' must be an "
                                                                "absolute path without control characters"),
    ({"container": container(image="/srv/bench\n.sqfs")}, "must be an absolute path without control characters"),
    ({"container": container(digest="sha256:ABC")}, r"digest 'sha256:ABC' is not sha256:<64 lowercase hex digits>"),
    ({"container": container(digest="md5:" + "0" * 32)}, "is not sha256:<64 lowercase hex digits>"),
    ({"container": container(mounts=("/var/lib/hpcml/results", "/data,x"))}, "container mount '/data,x' must not hold"),
    ({"container": container(mounts=(containers.SHM,))}, "the ranks' output dir /var/lib/hpcml/results/r1/raw is in "
                                                         "none of the container's mounts"),
])
def test_a_container_the_job_cannot_have_is_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        job(**{"launcher": "mpirun", **changes}).validate()


def test_an_mpijob_starts_no_ranks_in_a_container():
    mpijob = job(launcher="mpijob", stack="k8s", hosts=(), output_dir="/tmp/benchrunner/r1/raw",
                 container=container(mounts=("/tmp/benchrunner", "/var/lib/hpcml/datasets/cxr")))
    with pytest.raises(ValueError, match="launcher mpijob cannot start ranks in charliecloud containers"):
        mpijob.validate()


def srun_step(script: str) -> list[str]:
    """The batch script's step: what `benchrunner watch` runs after --."""
    line = next(line for line in script.splitlines() if " watch " in line)
    words = shlex.split(line)
    return words[words.index("--") + 1:]


@pytest.mark.parametrize("runtime", sorted(STARTS_IN["srun"]))
def test_srun_starts_every_rank_in_the_container_and_watches_it_from_the_host(runtime):
    script = srun.script(job(runtime, launcher="srun", stack="slurm", extra_args=("--cpu-bind=none",)), LIMITS)
    step = srun_step(script)
    # The watchdog on the batch host is the nodes' benchrunner; the ranks run the image's.
    assert f"{NODES_BENCHRUNNER} watch --run-id r1" in script and NODES_BENCHRUNNER not in step
    assert step[:4] == ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--cpu-bind=none"]
    task = step[4:step.index(containers.IMAGE_BENCHRUNNER)]
    expected = containers.get(runtime).srun_task(container(runtime), [], gpus=True)
    assert task == expected
    ranks = rank_part(step)
    assert (ranks.container, ranks.image, ranks.image_digest, ranks.container_mount) == (
        runtime, IMAGE, DIGEST, list(MOUNTS))


@pytest.mark.parametrize("runtime", sorted(STARTS_IN["mpirun"]))
def test_mpirun_starts_the_runtimes_command_as_each_rank_the_hybrid_model(runtime):
    argv = mpirun.argv(job(runtime), "/var/lib/hpcml/results/r1/hostfile")
    start = argv.index(containers.get(runtime).command(container(runtime), [], gpus=True)[0])
    assert argv[:start][-2:] == ["-x", "NCCL_IB_DISABLE=1"]
    rank = argv[argv.index(containers.IMAGE_BENCHRUNNER):]
    assert argv[start:] == containers.get(runtime).command(container(runtime), rank, gpus=True)
    assert rank_part(argv).container == runtime


@pytest.mark.parametrize("runtime", sorted(STARTS_IN["torchrun"]))
def test_torchrun_runs_one_container_per_node_with_the_images_torchrun_inside(runtime):
    torch_job = job(runtime, launcher="torchrun", workload=TORCH)
    agents = torchrun.commands(torch_job)
    remote = shlex.split(agents[1][1][-1])
    agent = remote[remote.index("/opt/hpcml/venv/bin/torchrun"):]
    wrapped = containers.get(runtime).command(container(runtime), agent, gpus=True)
    assert remote[-len(wrapped):] == wrapped
    assert agent[1:3] == ["--nnodes=2", "--nproc-per-node=2"] and rank_part(agent).container == runtime
    # Under Slurm, srun's one task per node is the runtime's command around the agent.
    step = srun_step(torchrun.script(job(runtime, launcher="torchrun", stack="slurm", workload=TORCH), LIMITS))
    assert step[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert step[4] == wrapped[0] and rank_part(step).container == runtime


def launch(*options: str) -> list[str]:
    return ["launch", "--run-id", "r1", "--ranks", "2", "--hosts", "n1,n2", "--results-dir", "/var/lib/hpcml/results",
            "--benchrunner", "/opt/hpcml/venv/bin/benchrunner", *options]


@pytest.mark.parametrize(("launcher", "runtime"), sorted(
    (launcher, runtime) for launcher, runtimes in STARTS_IN.items() for runtime in runtimes))
def test_launch_dry_run_prints_the_launch_line_with_the_runtimes_command(launcher, runtime, capsys):
    stack = "slurm" if launcher == "srun" else "baremetal"
    framework = ["--framework", "pytorch-ddp"] if launcher == "torchrun" else []
    assert cli.main(launch("--dry-run", "--launcher", launcher, "--stack", stack, *framework, "--container", runtime,
                           "--image", IMAGE, "--image-digest", DIGEST)) == 0
    out = capsys.readouterr().out
    runtime_word = {"charliecloud": "ch-run", "apptainer": "apptainer exec", "enroot": f"--container-image={IMAGE}"}
    assert runtime_word[runtime] in out
    assert f"--container {runtime} --image {IMAGE} --image-digest {DIGEST}" in out


@pytest.mark.parametrize(("options", "message"), [
    (("--container", "docker", "--image", IMAGE), "invalid choice: 'docker' (choose from 'none', 'apptainer', "
                                                  "'charliecloud', 'enroot')"),
    (("--container", "apptainer"), "--container apptainer needs its image: --image PATH"),
    (("--image-digest", DIGEST), "--image-digest is a container image's: give its runtime with --container"),
    (("--container", "enroot", "--image", IMAGE), "launcher mpirun cannot start ranks in enroot containers"),
    (("--launcher", "horovodrun", "--container", "apptainer", "--image", IMAGE),
     "launcher horovodrun cannot start ranks in apptainer containers (it starts no ranks in containers)"),
    (("--container", "apptainer", "--image", "bench.sif"), "container image 'bench.sif' must be an absolute path"),
    (("--container", "apptainer", "--image", IMAGE, "--image-digest", "sha256:12"), "container/digest: 'sha256:12' "
                                                                                    "does not match"),
])
def test_launch_refuses_a_container_it_cannot_start(options, message, capsys):
    # An unknown runtime is argparse's to refuse (exit 2), the rest the job's.
    with pytest.raises(SystemExit, match="2") if "invalid choice" in message else nullcontext():
        assert cli.main(launch("--dry-run", *options)) == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def image(tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "bench.sqfs"
    path.write_bytes(b"hsqs squashfs image")
    return str(path), "sha256:" + hashlib.sha256(b"hsqs squashfs image").hexdigest()


@pytest.fixture
def started(monkeypatch) -> list[launchers.Job]:
    jobs: list[launchers.Job] = []
    monkeypatch.setattr(launchers, "execute", lambda job, *args, **kwargs: jobs.append(job) or 0)
    return jobs


def test_launch_reads_the_images_digest_and_the_ranks_record_it(image, started, tmp_path):
    path, digest = image
    assert cli.main(launch("--results-dir", str(tmp_path), "--container", "charliecloud", "--image", path)) == 0
    assert started[0].container.digest == digest and "--image-digest" in started[0].rank_argv()
    assert cli.main(launch("--results-dir", str(tmp_path), "--container", "charliecloud", "--image", path,
                           "--image-digest", digest)) == 0
    assert started[1].container.digest == digest


def test_launch_fails_before_anything_starts_on_another_image_or_none(image, started, tmp_path, capsys):
    path, digest = image
    assert cli.main(launch("--results-dir", str(tmp_path), "--container", "apptainer", "--image", path,
                           "--image-digest", DIGEST)) == 2
    assert f"container image {path}: its digest is {digest}, not the {DIGEST} the job gives" in capsys.readouterr().err
    missing = str(tmp_path / "gone.sif")
    assert cli.main(launch("--results-dir", str(tmp_path), "--container", "apptainer", "--image", missing)) == 2
    assert f"container image {missing}: cannot read: No such file or directory" in capsys.readouterr().err
    assert started == []


CH_ENV = {charliecloud.RUNNING_ENV: charliecloud.RUNNING_VALUE}
# A line of /proc/self/mountinfo inside Enroot 3.5.0's container: its lock file bound read-only over itself.
ENROOT_MOUNTINFO = ("812 790 0:63 / / ro,nosuid,nodev,relatime - overlay overlay rw\n"
                    "845 812 0:63 /.lock /.lock ro,nosuid,nodev,noexec - overlay overlay rw\n")
HOST_MOUNTINFO = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


@pytest.mark.parametrize(("runtime", "environ", "mountinfo"), [
    ("charliecloud", CH_ENV, HOST_MOUNTINFO),
    ("enroot", {}, ENROOT_MOUNTINFO),
    ("apptainer", {apptainer.CONTAINER_ENV: IMAGE}, HOST_MOUNTINFO),
])
def test_a_rank_finds_the_sign_of_the_runtime_it_records(runtime, environ, mountinfo):
    assert containers.container_problem(container(runtime), environ, mountinfo) is None
    # Outside any container, the rank that records one fails, naming what it did not find.
    outside = containers.container_problem(container(runtime), {}, HOST_MOUNTINFO)
    assert outside.startswith(f"this rank records container {runtime}, but does not run inside one (no ")
    assert containers.get(runtime).sign in outside
    # A rank that records none but runs inside one fails too.
    assert containers.container_problem(None, environ, mountinfo).startswith(
        f"this rank records no container, but runs inside {runtime}")
    assert containers.container_problem(None, {}, HOST_MOUNTINFO) is None
    # Inside another runtime it is not its own.
    other = "apptainer" if runtime == "charliecloud" else "charliecloud"
    assert containers.container_problem(container(other), environ, mountinfo).startswith(
        f"this rank records container {other}, but does not run inside one")


def test_enroot_is_told_by_its_lock_mount_not_by_any_path_holding_it():
    assert enroot.LOCK_MOUNT in containers.mount_points(ENROOT_MOUNTINFO)
    assert containers.mount_points("30 22 0:5 /.lock /srv/.lock rw - tmpfs tmpfs rw\n") == {"/srv/.lock"}


def test_an_apptainer_rank_in_another_image_fails():
    problem = containers.container_problem(container("apptainer"), {apptainer.CONTAINER_ENV: "/srv/other.sif"}, "")
    assert problem == (f"this rank records container image {IMAGE}, but apptainer runs /srv/other.sif "
                       "(APPTAINER_CONTAINER): pass --image as it was started")


def test_the_rank_fails_loudly_outside_the_container_it_was_told(monkeypatch, tmp_path, capsys):
    # Open MPI's variables, as mpirun's rank finds them: the launcher check passes, the container check does not.
    for name, value in (("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1"),
                        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(charliecloud.RUNNING_ENV, raising=False)
    rank = ["--run-id", "r1", "--output-dir", str(tmp_path), "--container", "charliecloud", "--image", IMAGE,
            "--image-digest", DIGEST, "--container-mount", str(tmp_path)]
    assert cli.main(["train", *rank, "--measured-steps", "1"]) == 2
    assert "this rank records container charliecloud, but does not run inside one" in capsys.readouterr().err
    assert cli.main(["allreduce", *rank]) == 2
    assert "this rank records container charliecloud" in capsys.readouterr().err
    # What a container's rank must be told: its image and digest; and no image without a runtime.
    assert cli.main(["allreduce", *rank[:-4]]) == 2
    assert "a rank in a charliecloud container records its image: give --image and --image-digest" in (
        capsys.readouterr().err)
    assert cli.main(["allreduce", "--run-id", "r1", "--output-dir", str(tmp_path), "--image", IMAGE]) == 2
    assert "--image describe a container: give its runtime with --container" in capsys.readouterr().err
    relative = [word if word != IMAGE else "bench.sqfs" for word in rank]
    assert cli.main(["allreduce", *relative, "--container-mount", "/a,b"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "--image 'bench.sqfs' must be an absolute path without control characters; --container-mount '/a,b' must not "
        "hold ',' or ':' (they separate the container runtimes' mount lists)")
    assert list(tmp_path.iterdir()) == []


def with_container(document: dict, record: dict | None) -> dict:
    if record is not None:
        document["provenance"]["container"] = record
    return document


def test_rank_results_with_and_without_a_container_validate_and_read_alike():
    old = rank_document()
    results.validate(results.RANK_RESULT, old)
    assert containers.recorded(old["provenance"]) == {"runtime": "none"}
    results.validate(results.RANK_RESULT, with_container(rank_document(), {"runtime": "none"}))
    record = container().record()
    new = with_container(rank_document(), record)
    results.validate(results.RANK_RESULT, new)
    assert containers.recorded(new["provenance"]) == record
    for bad, where in (({"runtime": "none", "image": IMAGE}, "container"),
                       ({"runtime": "charliecloud", "image": IMAGE}, "container"),
                       ({**record, "runtime": "docker"}, "container/runtime"),
                       ({**record, "digest": "sha256:1"}, "container/digest")):
        with pytest.raises(results.ResultError, match=f"at provenance/{where}:"):
            results.validate(results.RANK_RESULT, with_container(rank_document(), bad))


def test_the_summary_carries_the_container_and_fails_ranks_that_disagree(run_dir):
    record = container().record()
    same = summary.summarize(run_dir(with_container(rank_document(0), record), with_container(rank_document(1), record)))
    results.validate(results.SUMMARY, same)
    checks = {check["name"]: check for check in same["sanity"]["checks"]}
    assert same["container"] == record and checks["one container on every rank"]["passed"]
    # Results made before containers were recorded: the virtualenv on every rank.
    old = summary.summarize(run_dir(rank_document(0), with_container(rank_document(1), {"runtime": "none"})))
    assert old["container"] == {"runtime": "none"} and old["sanity"]["passed"]
    mixed = summary.summarize(run_dir(rank_document(0), with_container(rank_document(1), record)))
    check = {check["name"]: check for check in mixed["sanity"]["checks"]}["one container on every rank"]
    assert not check["passed"] and not mixed["sanity"]["passed"]
    assert check["detail"].startswith('rank 0: {"runtime": "none"}; rank 1: {"digest": "')


def test_a_job_document_names_its_container_and_the_plan_mounts_what_the_ranks_use():
    request = {"kind": "job", "schema_version": 1, "run_id": "r1", "program": "train", "stack": "slurm",
               "launcher": "srun", "network": "tcp", "ranks": 2, "gpus_per_node": 0, "hosts": ["n1", "n2"],
               "workload": {"data": "images"}, "container": {"runtime": "enroot", "image": IMAGE}}
    planned = job_document.plan(request)
    assert planned.job.container == containers.Container(
        "enroot", IMAGE, "", ("/var/lib/hpcml/results", "/var/lib/hpcml/datasets/chestxray14-mini", containers.SHM,
                              containers.MACHINE_ID))
    assert job_document.plan({**request, "container": "none"}).job.container is None
    assert "container" not in job_document.resolve({k: v for k, v in request.items() if k != "container"})
    # Resolved, launched as it was.
    assert job_document.launch_plan(job_document.resolve(request)).job.container == planned.job.container
    for bad, message in (({"runtime": "docker", "image": IMAGE}, "'docker' is not one of ['apptainer', 'charliecloud', "
                                                                 "'enroot']"),
                         ("enroot", "'none' was expected"),
                         ({"runtime": "enroot"}, "'image' is a required property")):
        with pytest.raises(ValueError, match=re.escape(message)):
            job_document.resolve({**request, "container": bad})
