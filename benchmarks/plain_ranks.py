"""What the plain peer loops (pytorch_ddp_plain.py, pytorch_fsdp_plain.py) share: this rank's place from its launcher's
variables, its device, and the process group, as PyTorch's own examples start a rank. Kept apart from benchrunner's
harness on purpose: the peers measure what that harness costs.

torchrun exports RANK, WORLD_SIZE and LOCAL_RANK (the GPU record starts the peers so); mpirun exports Open MPI's
OMPI_COMM_WORLD_* and, on benchrunner's mpirun line, MASTER_ADDR and MASTER_PORT (make bench starts them so).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

# Each launcher's names for (rank, world size, local rank), the first one present wins.
LAUNCHER_VARIABLES = {
    "torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    "mpirun": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
}
DEVICES = ("cuda", "cpu")


@dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device


def place(environ: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) from the launcher's variables; a rank started by neither stops, naming them."""
    for names in LAUNCHER_VARIABLES.values():
        if all(name in environ for name in names):
            rank, world_size, local_rank = (int(environ[name]) for name in names)
            return rank, world_size, local_rank
    wanted = "; ".join(f"{launcher}: {', '.join(names)}" for launcher, names in LAUNCHER_VARIABLES.items())
    raise SystemExit(f"no launcher's rank variables are set ({wanted}): start this loop with torchrun or mpirun")


def join(device_type: str) -> Rank:
    """This rank placed on its device (cuda: the GPU of its local rank) and joined to the others: NCCL on GPUs,
    Gloo on CPUs, meeting at MASTER_ADDR:MASTER_PORT."""
    rank, world_size, local_rank = place(os.environ)
    if device_type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world_size)
    return Rank(rank, world_size, local_rank, device)


def synchronize(device: torch.device) -> None:
    """CUDA queues the steps; the clock may only read once they have run."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def finish(code: int) -> None:
    """Leaves without the interpreter's teardown, as benchrunner's ranks do: there, once in a unit run (2026-11-24), a
    rank aborted with "terminate called without an active exception" after its figure was printed."""
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(code)
