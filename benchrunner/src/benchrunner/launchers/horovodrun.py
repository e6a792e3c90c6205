"""horovodrun from the launching node: Horovod's own launcher, for Horovod's framework only."""

from __future__ import annotations

import os
import shlex
from typing import Any

from benchrunner import watchdog
from benchrunner.frameworks import tensorflow_horovod
from benchrunner.launchers import Job, Launcher, Options, host_slots
from benchrunner.launchers.mpirun import exec_argv
from benchrunner.rank_env import RANK_ARGV_ENV


class Horovodrun(Launcher):
    name = "horovodrun"
    stacks = ("baremetal", "slurm")
    frameworks = (tensorflow_horovod.NAME,)
    # Not checked: horovodrun starts its ranks through mpirun or through Horovod's Gloo launcher, whose variables
    # differ.
    rank_variables = None
    needs = frozenset({"hosts"})

    def start(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits) -> int:
        os.environ.update(environment(job))
        return exec_argv(argv(job), job, options)


def argv(job: Job) -> list[str]:
    """horovodrun parses every option-like word of its command line, the rank program's included (it
    would take --cycle-time-ms for its own and refuse --network as ambiguous), so the rank program's
    arguments travel in the environment, which horovodrun forwards to every rank."""
    hosts = ",".join(f"{host}:{slots}" for host, slots in host_slots(job))
    return ["horovodrun", "-np", str(job.ranks), "-H", hosts, *job.extra_args, job.benchrunner, "rank"]


def environment(job: Job) -> dict[str, str]:
    return {**job.environment(), RANK_ARGV_ENV: shlex.join(job.rank_argv()[1:])}

