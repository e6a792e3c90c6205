"""horovodrun from the launching node: Horovod's own launcher, for Horovod's framework only."""

from __future__ import annotations

import os
import shlex

from benchrunner.frameworks import tensorflow_horovod
from benchrunner.launchers import Job, Options, host_slots
from benchrunner.launchers.mpirun import exec_argv
from benchrunner.rank_env import RANK_ARGV_ENV

NAME = "horovodrun"
STACKS = ("baremetal", "slurm")
DEFAULT_FOR = ()
FRAMEWORKS = (tensorflow_horovod.NAME,)
# Not checked: horovodrun starts its ranks through mpirun or through Horovod's Gloo launcher, whose variables differ.
RANK_VARIABLES = None
NEEDS = frozenset({"hosts"})
USES_HOSTS = True
LEAVES = ()
BEATS = True
WATCHED_IN_JOB = False


def first_host(job: Job) -> str | None:
    return job.hosts[0] if job.hosts else None


def argv(job: Job) -> list[str]:
    """horovodrun parses every option-like word of its command line, the rank program's included (it
    would take --cycle-time-ms for its own and refuse --network as ambiguous), so the rank program's
    arguments travel in the environment, which horovodrun forwards to every rank."""
    hosts = ",".join(f"{host}:{slots}" for host, slots in host_slots(job))
    return ["horovodrun", "-np", str(job.ranks), "-H", hosts, *job.extra_args, job.benchrunner, "rank"]


def environment(job: Job) -> dict[str, str]:
    return {**job.environment(), RANK_ARGV_ENV: shlex.join(job.rank_argv()[1:])}


def start(job: Job, options: Options) -> int:
    os.environ.update(environment(job))
    return exec_argv(argv(job), job, options)
