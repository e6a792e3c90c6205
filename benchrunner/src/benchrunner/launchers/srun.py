"""Slurm: a batch script whose srun starts every rank through Slurm's PMI (no mpirun, no SSH).

In a container, the hybrid model: srun's task is the runtime's command that starts the rank inside (Charliecloud,
Apptainer), or Pyxis starts the task in the container from srun's own options (Enroot); the MPI inside the image
speaks the host's PMIx through the environment Slurm gives each task."""

from __future__ import annotations

import math
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchrunner import frameworks, results, watchdog
from benchrunner.launchers import SCHEMA, Job, Launcher, Options, run_dir
from benchrunner.rank_env import LAUNCHED_AT_ENV

SCRIPT = "job.sbatch"
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# Where Slurm picks the nodes, the first is known only inside the job: the batch script finds it.
ALLOCATION_FIRST_NODE = "<the allocation's first node>"
FIRST_NODE = 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1'


class SlurmBatch(Launcher):
    """What a launcher that submits a batch script to Slurm shares: its settings (the job document's slurm), and the
    partition asked for checked with the cluster before anything is written."""

    settings_key = "slurm"

    @dataclass(frozen=True)
    class Settings:
        """The job's partition (None: the cluster's default) and srun's MPI plugin."""

        partition: str | None = field(default=None, metadata={SCHEMA: {"description": "null: the cluster's default partition"}})
        mpi: str = field(default="pmix", metadata={SCHEMA: {"description": "srun --mpi plugin"}})

    def settings_problems(self, settings: Any, job: Job, complete: bool) -> list[str]:
        return slurm_problems(settings.partition, settings.mpi)

    def host_problems(self, job: Job, settings: Any) -> list[str]:
        problem = settings.partition and "slurm" in self.on_stack(job.stack).needs \
            and partition_problem(settings.partition)
        return [problem] if problem else []


class Srun(SlurmBatch):
    name = "srun"
    stacks = ("slurm",)
    default_for = ("slurm",)
    frameworks = frameworks.names()
    containers = ("charliecloud", "enroot", "apptainer")
    rank_variables = "slurm"
    needs = frozenset({"slurm"})
    # Slurm places ranks where no hosts are given; hosts given are the ones used (--nodelist).
    uses_hosts = True
    leaves = (SCRIPT,)
    # srun hands every rank's output to the batch script on the batch host, not to the launching node (which only
    # follows the job): the script runs srun under `benchrunner watch` there, which ends a stalled job.
    watched_in_job = True

    def first_host(self, job: Job) -> str | None:
        return job.hosts[0] if job.hosts else ALLOCATION_FIRST_NODE

    def start(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits) -> int:
        return submit(job, options, script(job, limits, partition=settings.partition, mpi=settings.mpi))


def slurm_problems(partition: str | None, mpi: str) -> list[str]:
    """Why these cannot go into a batch script's #SBATCH line and srun's --mpi."""
    return [p for p in (partition_name_problem(partition), mpi_problem(mpi)) if p]


def partition_name_problem(partition: str | None) -> str | None:
    if partition is not None and not SLURM_NAME.fullmatch(partition):
        return f"Slurm partition {partition!r} is not a partition name (letters, digits, '_', '.', '-')"
    return None


def mpi_problem(mpi: str) -> str | None:
    if not SLURM_NAME.fullmatch(mpi):
        return f"Slurm MPI plugin {mpi!r} is not a plugin name (pmix, pmi2, ...)"
    return None


def time_limit_minutes(limits: watchdog.Limits) -> int:
    """Slurm's time limit for the job: its timeout_s in whole minutes (Slurm's unit), rounded up, and one more, so that
    the watchdog, which says what each rank was doing, ends a job that outlives its timeout_s before Slurm does."""
    return math.ceil(limits.timeout_s / 60) + 1


def script(job: Job, limits: watchdog.Limits, partition: str | None = None, mpi: str = SlurmBatch.Settings.mpi) -> str:
    """A batch script whose srun starts every rank through Slurm's PMI (no mpirun, no SSH), watched for stalls on the
    batch host, where srun passes on every rank's output (beats included)."""
    job.validate()
    problem = mpi_problem(mpi)
    if problem:
        raise ValueError(problem)
    srun = ["srun", f"--mpi={mpi}", "--kill-on-bad-exit=1", *job.extra_args,
            *job.in_container(job.rank_argv(), under_srun=True)]
    return batch_script(job, limits, partition, tasks=job.ranks, tasks_per_node=min(job.slots_per_node, job.ranks),
                        step=shlex.join(srun))


def batch_script(job: Job, limits: watchdog.Limits, partition: str | None, tasks: int, tasks_per_node: int, step: str,
                 before_step: tuple[str, ...] = ()) -> str:
    """A batch script for a validated job: its #SBATCH lines (job.nodes nodes, `tasks` Slurm tasks, tasks_per_node on
    each, the time limit, the nodes and GPUs asked for), the launch time and the ranks' environment, then
    `before_step` and the step (a shell command line that starts the tasks) under `benchrunner watch`, on the batch
    host, where the step passes on every rank's output (beats included)."""
    problem = partition_name_problem(partition)
    if problem:
        raise ValueError(problem)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=benchrunner-{job.run_id}"[:200],
        f"#SBATCH --nodes={job.nodes}",
        f"#SBATCH --ntasks={tasks}",
        f"#SBATCH --ntasks-per-node={tasks_per_node}",
        f"#SBATCH --time={time_limit_minutes(limits)}",
        f"#SBATCH --output={job.output_dir}/slurm-%j.out",
        "#SBATCH --exclusive",
    ]
    if job.hosts:
        # The nodes the caller collects results from; Slurm would otherwise pick any idle ones.
        lines.append(f"#SBATCH --nodelist={','.join(job.hosts[:job.nodes])}")
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += ["set -euo pipefail",
              # Launch time is when the job starts on its nodes; queueing is not the workload's cost.
              f"export {LAUNCHED_AT_ENV}=$(date +%s.%N)"]
    environment = job.environment()
    if environment.get("MASTER_ADDR") == ALLOCATION_FIRST_NODE:
        environment.pop("MASTER_ADDR")
        lines.append(f"MASTER_ADDR=$({FIRST_NODE})")
        lines.append("export MASTER_ADDR")
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(environment.items())]
    lines += before_step
    # The watchdog ends a stalled job by signalling srun's process group (SIGTERM and SIGCONT, SIGKILL after a
    # grace): srun passes the signals on to its step's tasks on every node (srun(1), SIGNALS AND ESCAPE SEQUENCES;
    # on SIGTERM it logs "forcing job termination" and sends them SIGKILL), so a stopped (SIGSTOP) rank ends too;
    # a step left when the script exits, Slurm ends with the job. The watchdog's exit status (STALLED_EXIT or
    # TIMED_OUT_EXIT for a job it ended) is the script's, the last command, so the job's ExitCode.
    watch = [job.benchrunner, watchdog.COMMAND, "--run-id", job.run_id, "--run-dir", str(run_dir(job)),
             "--ranks", str(job.ranks), "--timeout", str(limits.timeout_s), "--stall-timeout",
             str(limits.stall_timeout_s), "--startup-timeout", str(limits.startup_timeout_s), "--"]
    lines.append(f"{shlex.join(watch)} {step}")
    return "\n".join(lines) + "\n"


def submit(job: Job, options: Options, text: str) -> int:
    """Print the batch script (a dry run), or keep it in the run's folder, submit it and follow the job to its end."""
    if options.dry_run:
        print(text, end="")
        return 0
    Path(job.output_dir).mkdir(parents=True, exist_ok=True)
    results.write_atomic(run_dir(job) / SCRIPT, text)
    return submit_and_follow(run_dir(job) / SCRIPT)


# Slurm's job states after which the job will not run again (squeue(1), JOB STATE CODES).
SLURM_DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                     "BOOT_FAIL", "DEADLINE")


def partition_problem(partition: str) -> str | None:
    """Why Slurm would not take a job in this partition, asked before anything is written or submitted. scontrol
    prints "Partition NAME not found" on stdout and exits 1 for an unknown one (src/scontrol/info_part.c)."""
    shown = subprocess.run(["scontrol", "--oneliner", "show", "partition", partition], capture_output=True, text=True,
                           check=False)
    if shown.returncode != 0 or f"PartitionName={partition} " not in shown.stdout + " ":
        known = subprocess.run(["sinfo", "--noheader", "--format=%R"], capture_output=True, text=True, check=False)
        names = ", ".join(sorted(set(known.stdout.split()))) or "none listed"
        return (f"Slurm partition {partition!r} does not exist ({(shown.stderr or shown.stdout).strip()}); "
                f"the cluster's partitions: {names}")
    return None


def submit_and_follow(batch_script: Path, poll_s: float = 0.05, max_poll_s: float = 1.0) -> int:
    """sbatch the script, then follow the job until it ends; its exit code.

    `sbatch --wait` polls at growing intervals (2 s, then 10, 42, 74...), so a 10-second job held its caller for 42.
    Here the interval is a twentieth of the time followed so far, from poll_s up to max_poll_s: the end of a
    few-second job is seen within a few tenths of a second, and a long job costs slurmctld one query a second.
    """
    submitted = subprocess.run(["sbatch", "--parsable", str(batch_script)], capture_output=True, text=True, check=False)
    if submitted.returncode != 0:
        print(submitted.stderr.strip() or f"sbatch failed (exit {submitted.returncode})", file=sys.stderr)
        return submitted.returncode or 1
    job_id = submitted.stdout.strip().split(";")[0]
    print(f"Submitted batch job {job_id}", flush=True)
    followed_from = time.monotonic()
    while True:
        shown = subprocess.run(["scontrol", "--oneliner", "show", "job", job_id], capture_output=True, text=True,
                               check=False)
        if shown.returncode != 0:
            print(f"slurm job {job_id}: scontrol cannot show it: {shown.stderr.strip()}", file=sys.stderr)
            return 1
        state = re.search(r"\bJobState=(\S+)", shown.stdout)
        if state is None:
            print(f"slurm job {job_id}: no JobState in scontrol's answer: {shown.stdout.strip()!r}", file=sys.stderr)
            return 1
        if state.group(1) in SLURM_DONE_STATES:
            break
        time.sleep(min(max(poll_s, (time.monotonic() - followed_from) / 20), max_poll_s))
    if state.group(1) == "COMPLETED":
        return 0
    code = re.search(r"\bExitCode=(\d+):(\d+)", shown.stdout)
    reason = re.search(r"\bReason=(\S+)", shown.stdout)
    print(f"slurm job {job_id} ended {state.group(1)}" + (f" ({reason.group(1)})" if reason else ""), file=sys.stderr)
    return int(code.group(1)) if code and int(code.group(1)) else 1

