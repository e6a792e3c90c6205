"""Open MPI's mpirun from the launching node: ranks fill each host's slots in turn, started over SSH."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from benchrunner import frameworks, results, watchdog
from benchrunner.launchers import Job, Launcher, Options, hostfile, run_dir
from benchrunner.rank_env import LAUNCHED_AT_ENV

HOSTFILE = "hostfile"


class Mpirun(Launcher):
    name = "mpirun"
    # It also runs inside a Slurm allocation.
    stacks = ("baremetal", "slurm")
    default_for = ("baremetal",)
    frameworks = frameworks.names()
    rank_variables = "openmpi"
    needs = frozenset({"hosts"})
    leaves = (HOSTFILE,)

    def start(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits) -> int:
        path = str(run_dir(job) / HOSTFILE) if job.hosts else None
        if path and not options.dry_run:
            results.write_atomic(Path(path), hostfile(job))
        return exec_argv(argv(job, path), job, options)


def argv(job: Job, hostfile_path: str | None) -> list[str]:
    """Open MPI's mpirun; ranks fill each host's slots in turn (GPU i of a node = local rank i)."""
    argv = ["mpirun", "-np", str(job.ranks)]
    if hostfile_path:
        argv += ["--hostfile", hostfile_path]
    argv += ["--map-by", "slot", "--bind-to", "none", "-x", LAUNCHED_AT_ENV, "-x", "PATH"]
    for name, value in sorted(job.environment().items()):
        argv += ["-x", f"{name}={value}"]
    return argv + list(job.extra_args) + job.rank_argv()


def exec_argv(argv: list[str], job: Job, options: Options) -> int:
    """Print the command (a dry run), or replace this process with it."""
    if options.dry_run:
        print(shlex.join(argv))
        return 0
    Path(job.output_dir).mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    os.execvp(argv[0], argv)

