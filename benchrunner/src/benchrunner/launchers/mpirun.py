"""Open MPI's mpirun from the launching node: ranks fill each host's slots in turn, started over SSH.

In a container, the hybrid model: the host's mpirun and its orted on each node start the runtime's command, which
starts the rank inside; the Open MPI inside the image meets the host's through the environment orted gives it, so
the image's Open MPI (Debian bookworm's 4.1.4) must be the nodes' release."""

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
    # Runtimes whose command a node's orted can start; Enroot's start only under srun.
    containers = ("charliecloud", "apptainer")
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
    return argv + list(job.extra_args) + job.in_container(job.rank_argv())


def exec_argv(argv: list[str], job: Job, options: Options) -> int:
    """Print the command (a dry run), or replace this process with it."""
    if options.dry_run:
        print(shlex.join(argv))
        return 0
    Path(job.output_dir).mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    os.execvp(argv[0], argv)

