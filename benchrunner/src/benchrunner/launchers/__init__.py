"""One job, several ways to start it: each launcher is one module (or subpackage) of this package defining one
subclass of Launcher, found here and nowhere else.

Every launcher runs the same rank program (`benchrunner train` or `benchrunner allreduce`) with the same workload
options and environment; only how the processes are placed differs. What a launcher is (its stacks, frameworks, the
variables its ranks find, what it needs and leaves) it declares as class attributes of its Launcher subclass; what it
may be given, as its own frozen Settings, read from the job document's key it names; and how a job starts, as its
start (from the launching node) or its submit (from the control host). The rest of benchrunner asks the launcher
these, never its name.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from benchrunner import containers, frameworks, plugins, results, watchdog
from benchrunner.containers import Container
from benchrunner.rank_env import GPU_ENV, LAUNCHED_AT_ENV, SINGLE
from benchrunner.sweep import MAX_BYTES, MIN_BYTES
from benchrunner.workload import Workload

STACKS = ("baremetal", "slurm", "k8s")
# The run's record beside its raw/ results and the LEAVES, on the launcher's host and on the control host.
JOB_JSON = "job.json"
NETWORKS = ("tcp", "rdma", "ipoib", "overlay")
PROGRAMS = ("train", "allreduce")
# NCCL settings per network mode, so RDMA, IPoIB and TCP runs differ only where they must.
NCCL_ENV = {
    "rdma": {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "PHB"},
    "ipoib": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "ib0"},
    "tcp": {"NCCL_IB_DISABLE": "1"},
    "overlay": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"},
}
# What each value that reaches a batch script, hostfile, manifest or command line may be: data is quoted where it
# is written, and these keep a value from being read as more than one (a newline is a new hostfile line or
# script command).
HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What `git describe --always --dirty` prints: a commit id, or tag-N-gid, with -dirty.
GIT_DESCRIBE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def data_dir(program: str, workload: Workload) -> str | None:
    """The dataset folder a job's ranks read (None: they make their own data)."""
    return workload.data_dir if program == "train" and workload.data != "synthetic" else None


def path_problem(what: str, value: str) -> str | None:
    if not value.startswith("/") or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"{what} {value!r} must be an absolute path without control characters"
    return None



@dataclass(frozen=True)
class OnStack:
    """What a launcher needs, leaves and where its job is watched, on one of its stacks."""

    needs: frozenset[str]
    leaves: tuple[str, ...]
    watched_in_job: bool


@dataclass(frozen=True)
class Options:
    """How the launching host carries a job out: not part of the job. A launcher that submits its job from the control
    host writes the job's record and collects its results in collect_dir, with the cluster's credentials in
    kubeconfig; manifest_out keeps what it submits, and keep leaves the submitted job in place."""

    dry_run: bool = False
    collect_dir: str | None = None
    kubeconfig: str | None = None
    manifest_out: str | None = None
    keep: bool = False


class Launcher:
    """One way to start a job. Each launcher module defines one subclass; the registry holds one instance of each.

    name            what jobs and campaigns call it
    stacks          the stacks it runs on; default_for, those whose default launcher it is
    frameworks      the frameworks whose ranks it can start
    containers      the container runtimes (benchrunner.containers) it can start its ranks in, through the runtime
    rank_variables  whose variables tell each rank its place (rank_env: torchrun, openmpi, slurm), which every rank
                    checks it found before it joins (launcher_problem); None where nothing is checked
    needs           what it must be given: "hosts" (to place ranks on), "slurm" (a controller), "kubeconfig"
    uses_hosts      whether hosts it is given decide where ranks run (an MPIJob's pods are placed by Kubernetes)
    leaves          the files it writes in the run's folder beside raw/, kept with the results
    beats           whether its ranks beat and their job is watched, so that a stalled one is ended and named
                    (benchrunner.watchdog)
    watched_in_job  where a job whose ranks beat is watched: False on the launching node, where the launcher's output
                    holds the ranks' (execute runs start() under the watchdog); True inside the job, where start() has
                    the launcher run under `benchrunner watch` (srun's batch script, on the batch host, where Slurm
                    sends the ranks' output)
    needs, leaves and watched_in_job may instead be dicts by stack, for a launcher that starts its job differently on
    each of its stacks (torchrun: over SSH on bare metal, in a batch job under Slurm); on_stack() reads them.
    runs_in_pods    whether its ranks run in containers of their own (an MPIJob's pods): benchrunner is the image's and
                    results leave through the job's log, not the nodes' folders
    submits         whether the control host submits its job (submit()) rather than a node starting it (start())
    manifest_kind   (apiVersion, kind) of the object it submits (manifest(), checked offline by check_manifest())
    settings_key    the job document's key that holds its Settings (None where it takes none); a job of another
                    launcher that holds this key is refused (settings_keys). The Settings are the key's one home:
                    its defaults (job_defaults) and its job schema property (settings_schema, written by make docs)
                    are read from their fields; launchers sharing a key declare its fields alike (key_fields)
    """

    name: ClassVar[str]
    stacks: ClassVar[tuple[str, ...]]
    default_for: ClassVar[tuple[str, ...]] = ()
    frameworks: ClassVar[tuple[str, ...]]
    containers: ClassVar[tuple[str, ...]] = ()
    rank_variables: ClassVar[str | None]
    needs: ClassVar[frozenset[str] | dict[str, frozenset[str]]]
    uses_hosts: ClassVar[bool] = True
    leaves: ClassVar[tuple[str, ...] | dict[str, tuple[str, ...]]] = ()
    beats: ClassVar[bool] = True
    watched_in_job: ClassVar[bool | dict[str, bool]] = False
    runs_in_pods: ClassVar[bool] = False
    submits: ClassVar[bool] = False
    manifest_kind: ClassVar[tuple[str, str] | None] = None
    settings_key: ClassVar[str | None] = None

    @dataclass(frozen=True)
    class Settings:
        """A launcher that takes no settings."""

    def settings(self, document: dict[str, Any]) -> Any:
        """Its Settings from a job document: its settings key's, each left out (or the whole key) its default."""
        return self.Settings(**document.get(self.settings_key, {})) if self.settings_key else self.Settings()

    def settings_problems(self, settings: Any, job: Job, complete: bool) -> list[str]:
        """Every value of its settings it could not use for this job, each naming its key; complete=False for a job
        whose hosts and inventory settings are added later."""
        return []

    def job_problems(self, job: Job) -> list[str]:
        """What it cannot start of a job that is otherwise valid."""
        return []

    def host_problems(self, job: Job, settings: Any) -> list[str]:
        """What the host and cluster it starts the job from must hold, asked before anything is written or started."""
        return []

    def on_stack(self, stack: str) -> OnStack:
        """Its needs, leaves and watched_in_job on `stack`, whether it declares them once or per stack."""
        if stack not in self.stacks:
            raise ValueError(f"launcher {self.name} does not run on stack {stack} (it runs on {', '.join(self.stacks)})")
        values = (self.needs, self.leaves, self.watched_in_job)
        return OnStack(*(value[stack] if isinstance(value, dict) else value for value in values))

    def first_host(self, job: Job) -> str | None:
        """The host rank 0 runs on where the launcher decides it (None where ranks learn it otherwise)."""
        return job.hosts[0] if job.hosts else None

    def start(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits) -> int:
        """Start the job from the launching node (the limits are for a launcher watched inside its job)."""
        raise ValueError(f"launcher {self.name} submits jobs from the control host, not from a node")

    def submit(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits, record: str | None) -> int:
        """Submit the job from the control host, writing its record (the resolved job) where its results are
        collected; 0 when it succeeded and every result was collected."""
        raise ValueError(f"launcher {self.name} starts jobs from a node, not from the control host")

    def manifest(self, job: Job, settings: Any) -> dict[str, Any]:
        """The object it submits for the job, checked offline against its API (a launcher whose manifest_kind is
        set)."""
        raise ValueError(f"launcher {self.name} submits no object")

    def check_manifest(self, manifest: dict[str, Any], kubernetes_version: str) -> None:
        """Raise ValueError naming the first place its object departs from its API (checked offline)."""
        raise ValueError(f"launcher {self.name} submits no object")


@cache
def registry() -> dict[str, Launcher]:
    """Every launcher of this package by its name."""
    return plugins.discover(__name__, __path__, "launcher", plugin=plugins.instance_of(Launcher, "launcher"),
                            name=lambda launcher: launcher.name)


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def get(name: str) -> Launcher:
    return plugins.pick(registry(), name, "launcher")


def settings_keys() -> dict[str, tuple[str, ...]]:
    """Every job document key that holds a launcher's settings, with the launchers that read it."""
    keys: dict[str, tuple[str, ...]] = {}
    for name, launcher in sorted(registry().items()):
        if launcher.settings_key:
            keys[launcher.settings_key] = (*keys.get(launcher.settings_key, ()), name)
    return keys


# What a Settings field's metadata may tell the job schema: SCHEMA, JSON Schema keywords its property adds to the type
# its annotation gives (a description, a pattern, a minimum); NULL_IS_DEFAULT, that null in a job document stands for
# the field's default (what a play with no value to give passes), which resolving the job puts in its place.
SCHEMA, NULL_IS_DEFAULT = "schema", "null_is_default"
# The annotations a setting may have, as the job schema types them (a union of them: a list of types).
JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class KeyField:
    """One setting of a settings key: its type (the annotation), its default and its metadata."""

    name: str
    type: Any
    default: Any
    metadata: dict[str, Any]


def key_fields(key: str) -> tuple[KeyField, ...]:
    """The settings of a job document's settings key: the fields every launcher reading it has in its Settings (a
    field only some of them have is theirs alone, at its default, and no key of the document). ValueError where two
    readers give one of them another type, default or metadata: the document could not say whose it holds."""
    readers = settings_keys()[key]
    # Each setting's declarations, as (declared, the readers declaring it so).
    found: dict[str, list[tuple[KeyField, list[str]]]] = {}
    for name in readers:
        settings = get(name).Settings
        hints = typing.get_type_hints(settings)
        for f in dataclasses.fields(settings):
            declared, variants = KeyField(f.name, hints[f.name], f.default, dict(f.metadata)), found.setdefault(f.name, [])
            same = next((names for other, names in variants if other == declared), None)
            if same is None:
                variants.append((declared, [name]))
            else:
                same.append(name)
    shared = {setting: variants for setting, variants in found.items()
              if sum(len(names) for _, names in variants) == len(readers)}
    disagreeing = [f"{setting}: " + "; ".join(f"{', '.join(names)}: {declared.type} = {declared.default!r}"
                                              f"{f' {declared.metadata}' if declared.metadata else ''}"
                                              for declared, names in variants)
                   for setting, variants in shared.items() if len(variants) > 1]
    if disagreeing:
        raise ValueError(f"the launchers reading settings key {key} ({', '.join(readers)}) must declare its settings "
                         f"alike, but differ on {' | '.join(disagreeing)}")
    return tuple(variants[0][0] for variants in shared.values())


def settings_defaults() -> dict[str, dict[str, Any]]:
    """Every settings key's defaults by setting: what a job of a launcher reading it holds where it says nothing."""
    return {key: {setting.name: setting.default for setting in key_fields(key)} for key in settings_keys()}


def null_as_default(key: str, values: dict[str, Any]) -> dict[str, Any]:
    """A settings key's values with each null that stands for its setting's default (NULL_IS_DEFAULT) that default."""
    defaults = {setting.name: setting.default for setting in key_fields(key) if setting.metadata.get(NULL_IS_DEFAULT)}
    return {name: defaults[name] if value is None and name in defaults else value for name, value in values.items()}


def _json_type(key: str, setting: KeyField) -> str | list[str]:
    union = typing.get_origin(setting.type) in (typing.Union, types.UnionType)
    allowed = list(typing.get_args(setting.type) if union else (setting.type,))
    if setting.metadata.get(NULL_IS_DEFAULT) and type(None) not in allowed:
        allowed.append(type(None))
    if any(kind not in JSON_TYPES for kind in allowed):
        raise ValueError(f"settings key {key}: {setting.name} is annotated {setting.type}, which a job document cannot "
                         f"hold (one of {', '.join(kind.__name__ for kind in JSON_TYPES)}, or a union of them)")
    named = [JSON_TYPES[kind] for kind in allowed]
    return named[0] if len(named) == 1 else named


def settings_schema(key: str) -> dict[str, Any]:
    """The job schema's property for a settings key: an object of its settings, none other, each of its annotation's
    type (with null where null stands for its default) and what its metadata's SCHEMA adds."""
    return {"type": "object", "additionalProperties": False,
            "properties": {setting.name: {"type": _json_type(key, setting), **setting.metadata.get(SCHEMA, {})}
                           for setting in key_fields(key)}}


def default_for(stack: str) -> str:
    return next(name for name, launcher in sorted(registry().items()) if stack in launcher.default_for)


def stacks_of(name: str) -> tuple[str, ...]:
    return tuple(get(name).stacks)


def on_stack(name: str, stack: str) -> OnStack:
    return get(name).on_stack(stack)


@dataclass(frozen=True)
class Job:
    run_id: str
    output_dir: str
    ranks: int
    hosts: tuple[str, ...] = ()
    gpus_per_node: int = 0
    workload: Workload = field(default_factory=Workload)
    program: str = "train"
    stack: str = "baremetal"
    launcher: str = "mpirun"
    network: str = "tcp"
    # The benchrunner executable on the nodes (or in the image).
    benchrunner: str = "benchrunner"
    env: tuple[tuple[str, str], ...] = ()
    extra_args: tuple[str, ...] = ()
    git_commit: str | None = None
    allreduce_min_bytes: int = MIN_BYTES
    allreduce_max_bytes: int = MAX_BYTES
    # The container every rank runs in; None: the nodes' virtualenv.
    container: Container | None = None

    @property
    def framework(self) -> str:
        return self.workload.framework

    @property
    def rank_benchrunner(self) -> str:
        """The benchrunner the ranks run: the image's inside a container, else the nodes'."""
        return containers.IMAGE_BENCHRUNNER if self.container else self.benchrunner

    @property
    def slots_per_node(self) -> int:
        return max(self.gpus_per_node, 1)

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.slots_per_node)

    def validate(self, placed: bool = True) -> None:
        """Every problem of the job at once; placed=False leaves out whether its hosts are enough (not known yet)."""
        problems = []
        spec = registry().get(self.launcher)
        if spec is None:
            problems.append(f"launcher {self.launcher!r} is not one of {', '.join(names())}")
        else:
            if self.stack not in spec.stacks:
                problems.append(f"launcher {self.launcher} does not run on stack {self.stack} (it runs on "
                                f"{', '.join(spec.stacks)})")
            if self.framework not in spec.frameworks:
                problems.append(f"launcher {self.launcher} does not start {self.framework} ranks (it starts "
                                f"{', '.join(spec.frameworks)})")
        if self.program not in PROGRAMS:
            problems.append(f"program {self.program!r} is not one of {', '.join(PROGRAMS)}")
        if self.network not in NETWORKS:
            problems.append(f"network {self.network!r} is not one of {', '.join(NETWORKS)}")
        if self.ranks < 1:
            problems.append("ranks must be >= 1")
        problems += [p for p in (results.run_id_problem(self.run_id), path_problem("output dir", self.output_dir),
                                 path_problem("benchrunner", self.benchrunner) if "/" in self.benchrunner else None)
                     if p]
        problems += [f"host {h!r} is not a hostname" for h in self.hosts if not HOSTNAME.fullmatch(h)]
        problems += [f"environment variable name {name!r} is not a shell name ([A-Za-z_][A-Za-z0-9_]*)"
                     for name, _ in self.env if not ENV_NAME.fullmatch(name)]
        problems += [f"environment variable {name} must be a string without NUL (got {value!r})"
                     for name, value in self.env if not isinstance(value, str) or "\0" in value]
        if self.git_commit and not GIT_DESCRIBE.fullmatch(self.git_commit):
            problems.append(f"git commit {self.git_commit!r} is not what git describe prints")
        if self.container:
            problems += containers.problems(self.container, self.launcher, spec.containers if spec else ())
            problems += [p for p in (path_problem("container image", self.container.image),
                                     *(path_problem("container mount", m) for m in self.container.mounts)) if p]
            problems += [f"the ranks' {what} {path} is in none of the container's mounts ({', '.join(self.container.mounts)})"
                         for what, path in self._rank_paths() if not any(
                             Path(mount) == Path(path) or Path(mount) in Path(path).parents
                             for mount in self.container.mounts)]
        # A launcher that needs hosts must have enough; one that may leave placement to its scheduler (srun) must
        # have enough of those it is given; an MPIJob's pods are placed by Kubernetes.
        if placed and spec is not None and self.stack in spec.stacks \
                and ("hosts" in spec.on_stack(self.stack).needs or (self.hosts and spec.uses_hosts)) \
                and len(self.hosts) < self.nodes:
            problems.append(f"{self.ranks} ranks at {self.slots_per_node} per node need {self.nodes} hosts, "
                            f"{len(self.hosts)} given")
        if spec is not None and not problems:
            problems += spec.job_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        self.workload.validate()

    def _rank_paths(self) -> list[tuple[str, str]]:
        """The host folders the ranks write and read, which a container must show them."""
        data = data_dir(self.program, self.workload)
        return [("output dir", self.output_dir), *((("data dir", data),) if data else ())]

    def environment(self) -> dict[str, str]:
        """What every rank gets: the network mode's NCCL settings and what its container's runtime needs to give it
        what the job asks, then the user's (which win), then what the framework needs to find its peers where the
        launcher does not tell it, and whether the job asked for GPUs (not the user's to change)."""
        peers = frameworks.get(self.framework).rank_environment(get(self.launcher).first_host(self))
        runtime = containers.get(self.container.runtime).environment(self.gpus_per_node > 0) if self.container else {}
        return {**NCCL_ENV[self.network], **runtime, **dict(self.env), **peers,
                GPU_ENV: "1" if self.gpus_per_node else "0"}

    def in_container(self, argv: list[str], under_srun: bool = False) -> list[str]:
        """argv as the launcher starts it: inside the job's container, through its runtime (under_srun: srun starts
        it, and the runtime may instead give srun options of its own); as it is without one."""
        if not self.container:
            return argv
        runtime, gpus = containers.get(self.container.runtime), self.gpus_per_node > 0
        if under_srun:
            return runtime.srun_task(self.container, argv, gpus)
        return runtime.command(self.container, argv, gpus)

    def rank_argv(self) -> list[str]:
        """The program every rank runs; a rank in a container is told which (and checks it runs in it)."""
        argv = [self.rank_benchrunner, self.program, "--run-id", self.run_id, "--output-dir", self.output_dir,
                "--stack", self.stack, "--launcher", self.launcher, "--network", self.network]
        if self.git_commit:
            argv += ["--git-commit", self.git_commit]
        if self.container:
            argv += ["--container", self.container.runtime, "--image", self.container.image,
                     *(["--image-digest", self.container.digest] if self.container.digest else []),
                     *(f"--container-mount={mount}" for mount in self.container.mounts)]
        if self.program == "allreduce":
            framework = [] if self.framework == frameworks.DEFAULT else ["--framework", self.framework]
            return [*argv, *framework, "--min-bytes", str(self.allreduce_min_bytes),
                    "--max-bytes", str(self.allreduce_max_bytes)]
        return argv + self.workload.to_argv()


def host_slots(job: Job) -> list[tuple[str, int]]:
    placed, left = [], job.ranks
    for host in job.hosts[:job.nodes]:
        slots = min(job.slots_per_node, left)
        placed.append((host, slots))
        left -= slots
    return placed


def hostfile(job: Job) -> str:
    job.validate()
    return "".join(f"{host} slots={slots}\n" for host, slots in host_slots(job))


def kept_files(launcher: str, stack: str) -> tuple[str, ...]:
    """What a run's folder keeps beside raw/ of a job of this launcher on this stack: the job itself, what the launcher
    left and, for a job the watchdog ended, its record."""
    return (JOB_JSON, *on_stack(launcher, stack).leaves, *((watchdog.STALLED_JSON,) if get(launcher).beats else ()))


def run_dir(job: Job) -> Path:
    """The run's folder on the launching node: raw/'s parent, where LEAVES go."""
    return Path(job.output_dir).parent


def execute(job: Job, settings: Any, options: Options, limits: watchdog.Limits, record: str | None = None) -> int:
    """Carry the job out with its launcher and settings, within its limits, keeping `record` (the resolved job) with
    its results unless it is a dry run. A launcher that submits from the control host is handed all of it; one that
    starts from this node runs watched here where its ranks beat here, and a job that stalls or outlives its timeout is
    ended (benchrunner.watchdog); one watched inside its job is handed the limits for the watchdog there."""
    launcher = get(job.launcher)
    if launcher.submits:
        return launcher.submit(job, settings, options, limits, record)
    if record is not None and not options.dry_run:
        # The record of what was asked, beside the ranks' raw/ results; for the job's account alone, since environment
        # values may be private.
        results.write_atomic(run_dir(job) / JOB_JSON, record, mode=0o600)
    os.environ[LAUNCHED_AT_ENV] = f"{time.time():.6f}"
    # Ranks find benchrunner, and mpirun its orted, on the same path as here.
    os.environ["PATH"] = os.pathsep.join([str(Path(job.benchrunner).parent), os.environ.get("PATH", "")])

    def start() -> int:
        return launcher.start(job, settings, options, limits)

    # Not watched here where it is watched inside its job: the ranks' output does not come here.
    if options.dry_run or not launcher.beats or launcher.on_stack(job.stack).watched_in_job:
        return start()
    return watchdog.supervise(start, run_id=job.run_id, run_dir=run_dir(job), ranks=job.ranks, limits=limits)


def launcher_problem(source: str, launcher: str, framework: str) -> str | None:
    """Where a rank of `framework` found other variables (`source`) than the launcher it records would set: a process
    started by hand, or under another launcher, would otherwise be filed under that launcher's name."""
    spec = get(launcher)
    if framework not in spec.frameworks:
        return f"launcher {launcher} starts no {framework} ranks: pass --launcher as this rank was started"
    expected = spec.rank_variables
    if expected is None or source == expected:
        return None
    found = ("none of torchrun's, Open MPI's or Slurm's variables (a process started by hand)"
             if source == SINGLE else f"{source}'s variables")
    return (f"this rank records launcher {launcher}, whose ranks find {expected}'s variables, but it found {found}: "
            "start it with that launcher, or pass --launcher as it was started")
