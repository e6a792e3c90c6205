"""torchrun (PyTorch's elastic launcher) on bare metal: one agent per node, meeting through a c10d rendezvous on the
first node; each agent starts its node's ranks with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set.

The launching node starts its own agent directly and the others' over SSH, as mpirun reaches its nodes (the
cluster's MPI account, pinned host keys)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchrunner.frameworks import pytorch_ddp, pytorch_fsdp
from benchrunner.launchers import Job, Options, host_slots
from benchrunner.rank_env import LAUNCHED_AT_ENV

NAME = "torchrun"
STACKS = ("baremetal",)
DEFAULT_FOR = ()
FRAMEWORKS = (pytorch_ddp.NAME, pytorch_fsdp.NAME)
RANK_VARIABLES = "torchrun"
NEEDS = frozenset({"hosts"})
USES_HOSTS = True
LEAVES = ()
BEATS = True
WATCHED_IN_JOB = False
# torchrun's own default rendezvous port (torch.distributed.run: --rdzv-endpoint without a port).
RDZV_PORT = 29400
POLL_S = 0.5


def first_host(job: Job) -> str | None:
    """None: torchrun tells every rank where rank 0 is (MASTER_ADDR), so nothing else must."""
    return None


def agent_argv(job: Job, slots: int) -> list[str]:
    """One node's torchrun agent; torchrun is the one beside benchrunner, in the same environment."""
    torchrun = str(Path(job.benchrunner).parent / "torchrun") if "/" in job.benchrunner else "torchrun"
    return [torchrun, f"--nnodes={job.nodes}", f"--nproc-per-node={slots}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={job.hosts[0]}:{RDZV_PORT}", f"--rdzv-id={job.run_id}", "--max-restarts=0",
            "--no-python", *job.extra_args, *job.rank_argv()]


def _is_here(host: str) -> bool:
    here = socket.gethostname()
    return host in (here, here.split(".")[0], socket.getfqdn())


def commands(job: Job) -> list[tuple[str, list[str]]]:
    """(host, argv) of every agent: the local one as it is, the others over SSH with the ranks' environment on the
    remote command line (sshd passes none of ours)."""
    job.validate()
    environment = {**job.environment(), LAUNCHED_AT_ENV: os.environ.get(LAUNCHED_AT_ENV, f"{time.time():.6f}"),
                   "PATH": os.environ.get("PATH", "")}
    out = []
    for host, slots in host_slots(job):
        argv = agent_argv(job, slots)
        if _is_here(host):
            out.append((host, argv))
        else:
            remote = ["env", *(f"{name}={value}" for name, value in sorted(environment.items())), *argv]
            out.append((host, ["ssh", "-o", "BatchMode=yes", host, "--", shlex.join(remote)]))
    return out


def start(job: Job, options: Options) -> int:
    agents = commands(job)
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
