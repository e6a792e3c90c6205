"""torchrun (PyTorch's elastic launcher): one agent per node, meeting through a c10d rendezvous on the first node;
each agent starts its node's ranks with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set.

On bare metal the launching node starts its own agent directly and the others' over SSH, as mpirun reaches its nodes
(the cluster's MPI account, pinned host keys). Under Slurm (how most Slurm sites start PyTorch) a batch script's srun
starts one task per node, each an agent, meeting at the allocation's first node; the script is srun's (launchers.srun),
watched on the batch host, where srun passes on the agents' output and so the ranks' (torchrun's workers inherit its
stdout unless --redirects or --tee is given).

In a container, one per node: the agent is the image's torchrun, started through the runtime's command, and starts
its node's ranks inside the same container."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchrunner import watchdog
from benchrunner.frameworks import pytorch_ddp, pytorch_fsdp
from benchrunner.launchers import Job, Options, host_slots, srun
from benchrunner.rank_env import LAUNCHED_AT_ENV

# torchrun's own default rendezvous port (torch 2.13, torch/distributed/run.py: "If no port number is specified
# HOST_NODE_ADDR defaults to 29400"; c10d_rendezvous_backend.DEFAULT_PORT), given explicitly.
RDZV_PORT = 29400
POLL_S = 0.5
# The shell variable that holds the rendezvous host in the batch script.
RDZV_HOST_VARIABLE = "BENCHRUNNER_RDZV_HOST"


class Torchrun(srun.SlurmBatch):
    name = "torchrun"
    stacks = ("baremetal", "slurm")
    frameworks = (pytorch_ddp.NAME, pytorch_fsdp.NAME)
    # Runtimes with a command to start the agent in, on bare metal as under srun.
    containers = ("charliecloud", "apptainer")
    # Under Slurm the ranks also find srun's SLURM_* (of the agent's task): torchrun's come first (rank_env).
    rank_variables = "torchrun"
    needs: ClassVar[dict[str, frozenset[str]]] = {"baremetal": frozenset({"hosts"}), "slurm": frozenset({"slurm"})}
    leaves: ClassVar[dict[str, tuple[str, ...]]] = {"baremetal": (), "slurm": (srun.SCRIPT,)}
    # On bare metal the agents' output comes to the launching node; under Slurm, to the batch host.
    watched_in_job: ClassVar[dict[str, bool]] = {"baremetal": False, "slurm": True}

    @dataclass(frozen=True)
    class Settings(srun.SlurmBatch.Settings):
        """Slurm's, for its batch job on the slurm stack, and the port the agents meet at on the first node."""

        rdzv_port: int = RDZV_PORT

    def first_host(self, job: Job) -> str | None:
        """None: torchrun tells every rank where rank 0 is (MASTER_ADDR), so nothing else must."""
        return None

    def start(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits) -> int:
        """Start the job: in a batch job under Slurm (given the job's limits, for the watchdog there), else the agents
        from here."""
        if job.stack == "slurm":
            return srun.submit(job, options, script(job, limits, partition=settings.partition,
                                                    rdzv_port=settings.rdzv_port))
        return run_agents(commands(job, settings.rdzv_port), job, options)


def agent_argv(job: Job, slots: int, rdzv_host: str, rdzv_port: int = RDZV_PORT, under_srun: bool = False) -> list[str]:
    """One node's torchrun agent, in the job's container where it has one; torchrun is the one beside the ranks'
    benchrunner, in the same environment (under_srun: srun starts it)."""
    ranks = job.rank_benchrunner
    torchrun = str(Path(ranks).parent / "torchrun") if "/" in ranks else "torchrun"
    return job.in_container([torchrun, f"--nnodes={job.nodes}", f"--nproc-per-node={slots}", "--rdzv-backend=c10d",
                             f"--rdzv-endpoint={rdzv_host}:{rdzv_port}", f"--rdzv-id={job.run_id}", "--max-restarts=0",
                             "--no-python", *job.extra_args, *job.rank_argv()], under_srun)


def _is_here(host: str) -> bool:
    here = socket.gethostname()
    return host in (here, here.split(".")[0], socket.getfqdn())


def commands(job: Job, rdzv_port: int = RDZV_PORT) -> list[tuple[str, list[str]]]:
    """(host, argv) of every agent: the local one as it is, the others over SSH with the ranks' environment on the
    remote command line (sshd passes none of ours)."""
    job.validate()
    environment = {**job.environment(), LAUNCHED_AT_ENV: os.environ.get(LAUNCHED_AT_ENV, f"{time.time():.6f}"),
                   "PATH": os.environ.get("PATH", "")}
    out = []
    for host, slots in host_slots(job):
        argv = agent_argv(job, slots, job.hosts[0], rdzv_port)
        if _is_here(host):
            out.append((host, argv))
        else:
            remote = ["env", *(f"{name}={value}" for name, value in sorted(environment.items())), *argv]
            out.append((host, ["ssh", "-o", "BatchMode=yes", host, "--", shlex.join(remote)]))
    return out


def script(job: Job, limits: watchdog.Limits, partition: str | None = None, rdzv_port: int = RDZV_PORT) -> str:
    """A batch script whose srun starts one task per node, each a torchrun agent for that node's ranks, meeting at the
    allocation's first node (the batch host asks Slurm which it is, as for srun's MASTER_ADDR); one srun step, so
    every node runs the same number of ranks."""
    job.validate()
    per_node = min(job.slots_per_node, job.ranks)
    if job.ranks != job.nodes * per_node:
        raise ValueError(f"torchrun under Slurm starts the same number of ranks on every node: {job.ranks} ranks at "
                         f"{job.slots_per_node} per node would leave {job.nodes * per_node - job.ranks} of the last "
                         f"node's slots empty; ask for a multiple of {job.slots_per_node} ranks")
    # The agent's argv with the rendezvous host left to the shell; --kill-on-bad-exit ends every agent when one fails
    # (the others would wait for it at the rendezvous or the next collective).
    host = f"${{{RDZV_HOST_VARIABLE}}}"
    step = ["srun", f"--nodes={job.nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
            *agent_argv(job, per_node, host, rdzv_port, under_srun=True)]
    at = next(i for i, arg in enumerate(step) if arg.startswith("--rdzv-endpoint="))
    line = f'{shlex.join(step[:at])} --rdzv-endpoint="{host}:{rdzv_port}" {shlex.join(step[at + 1:])}'
    return srun.batch_script(job, limits, partition, tasks=job.nodes, tasks_per_node=1, step=line,
                             before_step=(f"{RDZV_HOST_VARIABLE}=$({srun.FIRST_NODE})",))


def run_agents(agents: list[tuple[str, list[str]]], job: Job, options: Options) -> int:
    """Print the agents' commands (a dry run), or run them until the first fails or all succeed."""
    if options.dry_run:
        for _, argv in agents:
            print(shlex.join(argv))
        return 0
    Path(job.output_dir).mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    environment = {**os.environ, **job.environment()}
    running = [(host, subprocess.Popen(argv, env=environment)) for host, argv in agents]
    # The first agent to fail ends the job: the others would wait for it at the next collective until timeout.
    while True:
        codes = [(host, process.poll()) for host, process in running]
        failed = [(host, code) for host, code in codes if code not in (None, 0)]
        if failed or all(code == 0 for _, code in codes):
            break
        time.sleep(POLL_S)
    for _, process in running:
        if process.poll() is None:
            process.terminate()
    for _, process in running:
        process.wait()
    if failed:
        host, code = failed[0]
        print(f"torchrun agent on {host} exited {code}", file=sys.stderr)
        return code or 1
    return 0
