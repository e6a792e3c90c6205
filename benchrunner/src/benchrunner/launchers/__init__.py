"""One job, several ways to start it: each launcher is one module of this package, found here and nowhere else.

Every launcher runs the same rank program (`benchrunner train` or `benchrunner allreduce`) with the same workload
options and environment; only how the processes are placed differs. A launcher module declares:
  NAME          what jobs and campaigns call it
  STACKS        the stacks it runs on; DEFAULT_FOR, those whose default launcher it is
  FRAMEWORKS    the frameworks whose ranks it can start
  RANK_VARIABLES  whose variables tell each rank its place (torchrun, openmpi, slurm), which every rank checks it
                found before it joins (launcher_problem); None where nothing is checked
  NEEDS         what it must be given: "hosts" (to place ranks on), "slurm" (a controller), "kubeconfig"
  USES_HOSTS    whether hosts it is given decide where ranks run (an MPIJob's pods are placed by Kubernetes)
  LEAVES        the files it writes in the run's folder beside raw/, kept with the results
  BEATS         whether its ranks beat and their job is watched, so that a stalled one is ended and named
                (benchrunner.watchdog)
  WATCHED_IN_JOB  where a job whose ranks beat is watched: False on the launching node, where the launcher's output
                holds the ranks' (execute runs start() under the watchdog); True inside the job, where start() has
                the launcher run under `benchrunner watch` (srun's batch script, on the batch host, where Slurm
                sends the ranks' output)
  NEEDS, LEAVES and WATCHED_IN_JOB may instead be dicts by stack, for a launcher that starts its job differently on
  each of its stacks (torchrun: over SSH on bare metal, in a batch job under Slurm); on_stack() reads them.
  first_host(job)  the host rank 0 runs on where the launcher decides it (None where ranks learn it otherwise)
  start(job, options)  starts the job from the launching node (None for one started from the control host); one
                watched inside its job is also given the job's limits (start(job, options, limits=...))
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

from benchrunner import frameworks, plugins, results, watchdog
from benchrunner.job_defaults import DEFAULTS
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


def path_problem(what: str, value: str) -> str | None:
    if not value.startswith("/") or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"{what} {value!r} must be an absolute path without control characters"
    return None



@cache
def registry() -> dict[str, ModuleType]:
    """Every launcher module of this package by its NAME."""
    return plugins.discover(__name__, __path__, "launcher")


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def get(name: str) -> ModuleType:
    return plugins.pick(registry(), name, "launcher")


def default_for(stack: str) -> str:
    return next(name for name, module in sorted(registry().items()) if stack in module.DEFAULT_FOR)


def stacks_of(name: str) -> tuple[str, ...]:
    return tuple(get(name).STACKS)


@dataclass(frozen=True)
class OnStack:
    """What a launcher needs, leaves and where its job is watched, on one of its stacks."""

    needs: frozenset[str]
    leaves: tuple[str, ...]
    watched_in_job: bool


def on_stack(name: str, stack: str) -> OnStack:
    """The launcher's NEEDS, LEAVES and WATCHED_IN_JOB on `stack`, whether it declares them once or per stack."""
    module = get(name)
    if stack not in module.STACKS:
        raise ValueError(f"launcher {name} does not run on stack {stack} (it runs on {', '.join(module.STACKS)})")
    values = [getattr(module, attribute) for attribute in ("NEEDS", "LEAVES", "WATCHED_IN_JOB")]
    return OnStack(*(value[stack] if isinstance(value, dict) else value for value in values))


@dataclass(frozen=True)
class Options:
    """How the launching node carries a job out: not part of the job."""

    dry_run: bool = False
    partition: str | None = None
    mpi: str = DEFAULTS["slurm"]["mpi"]


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

    @property
    def framework(self) -> str:
        return self.workload.framework

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
            if self.stack not in spec.STACKS:
                problems.append(f"launcher {self.launcher} does not run on stack {self.stack} (it runs on "
                                f"{', '.join(spec.STACKS)})")
            if self.framework not in spec.FRAMEWORKS:
                problems.append(f"launcher {self.launcher} does not start {self.framework} ranks (it starts "
                                f"{', '.join(spec.FRAMEWORKS)})")
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
        # A launcher that needs hosts must have enough; one that may leave placement to its scheduler (srun) must
        # have enough of those it is given; an MPIJob's pods are placed by Kubernetes.
        if placed and spec is not None and self.stack in spec.STACKS \
                and ("hosts" in on_stack(self.launcher, self.stack).needs or (self.hosts and spec.USES_HOSTS)) \
                and len(self.hosts) < self.nodes:
            problems.append(f"{self.ranks} ranks at {self.slots_per_node} per node need {self.nodes} hosts, "
                            f"{len(self.hosts)} given")
        if problems:
            raise ValueError("; ".join(problems))
        self.workload.validate()

    def environment(self) -> dict[str, str]:
        """What every rank gets: the network mode's NCCL settings, then the user's (which win), then what the
        framework needs to find its peers where the launcher does not tell it, and whether the job asked for GPUs
        (not the user's to change)."""
        peers = frameworks.get(self.framework).rank_environment(get(self.launcher).first_host(self))
        return {**NCCL_ENV[self.network], **dict(self.env), **peers, GPU_ENV: "1" if self.gpus_per_node else "0"}

    def rank_argv(self) -> list[str]:
        """The program every rank runs."""
        argv = [self.benchrunner, self.program, "--run-id", self.run_id, "--output-dir", self.output_dir,
                "--stack", self.stack, "--launcher", self.launcher, "--network", self.network]
        if self.git_commit:
            argv += ["--git-commit", self.git_commit]
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
    return (JOB_JSON, *on_stack(launcher, stack).leaves, *((watchdog.STALLED_JSON,) if get(launcher).BEATS else ()))


def run_dir(job: Job) -> Path:
    """The run's folder on the launching node: raw/'s parent, where LEAVES go."""
    return Path(job.output_dir).parent


def execute(job: Job, options: Options, limits: watchdog.Limits) -> int:
    """Start the job from this host with its launcher, within its limits: a launcher whose ranks beat here runs watched,
    and a job that stalls or outlives its timeout is ended (benchrunner.watchdog); one watched inside its job is
    handed the limits for the watchdog there."""
    os.environ[LAUNCHED_AT_ENV] = f"{time.time():.6f}"
    # Ranks find benchrunner, and mpirun its orted, on the same path as here.
    os.environ["PATH"] = os.pathsep.join([str(Path(job.benchrunner).parent), os.environ.get("PATH", "")])
    spec = get(job.launcher)
    if spec.start is None:
        raise ValueError(f"launcher {job.launcher} starts jobs from the control host, not from a node")
    if on_stack(job.launcher, job.stack).watched_in_job:
        # Not watched here: the ranks' output does not come here.
        return spec.start(job, options, limits=limits)
    if options.dry_run or not spec.BEATS:
        return spec.start(job, options)
    return watchdog.supervise(lambda: spec.start(job, options), run_id=job.run_id, run_dir=run_dir(job),
                              ranks=job.ranks, limits=limits)


def launcher_problem(source: str, launcher: str, framework: str) -> str | None:
    """Where a rank of `framework` found other variables (`source`) than the launcher it records would set: a process
    started by hand, or under another launcher, would otherwise be filed under that launcher's name."""
    module = get(launcher)
    if framework not in module.FRAMEWORKS:
        return f"launcher {launcher} starts no {framework} ranks: pass --launcher as this rank was started"
    expected = module.RANK_VARIABLES
    if expected is None or source == expected:
        return None
    found = ("none of torchrun's, Open MPI's or Slurm's variables (a process started by hand)"
             if source == SINGLE else f"{source}'s variables")
    return (f"this rank records launcher {launcher}, whose ranks find {expected}'s variables, but it found {found}: "
            "start it with that launcher, or pass --launcher as it was started")
