"""Where this rank is and how it joins the others: torchrun's, Open MPI's or Slurm's variables, then c10d."""

from __future__ import annotations

import atexit
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from benchrunner.rank_env import GPU_ENV, LAUNCHER_VARIABLES, SINGLE, variables_source

# Slurm writes a count repeated over nodes as "2(x3)": two tasks on each of three nodes.
SLURM_REPEATED = re.compile(r"(\d+)(\(x\d+\))?")


@dataclass(frozen=True)
class Placement:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    # Which launcher's variables said so: torchrun, openmpi, slurm, or single (none: one rank alone).
    source: str


def _number(environ: Mapping[str, str], name: str) -> int:
    value = environ[name]
    if name == "SLURM_NTASKS_PER_NODE":
        repeated = SLURM_REPEATED.fullmatch(value)
        if not repeated:
            raise ValueError(f"{name}={value!r}: expected a count of tasks on every node, such as '2' or '2(x3)'; "
                             "a list of different counts cannot say how many run beside this rank")
        return int(repeated.group(1))
    if not (value.isascii() and value.isdigit()):
        raise ValueError(f"{name}={value!r} is not a whole number")
    return int(value)


def rank_environment(environ: Mapping[str, str]) -> Placement:
    """This rank's place from the first launcher whose variables are set; one rank alone when none are. A launcher's
    variables set only in part, or disagreeing with each other, fail naming the variable."""
    source = variables_source(environ)
    if source == SINGLE:
        return Placement(0, 1, 0, 1, SINGLE)
    names = dict(LAUNCHER_VARIABLES)[source]
    present = [name for name in names if name in environ]
    missing = [name for name in names if name not in environ]
    if missing:
        hint = " (srun sets it given --ntasks-per-node)" if missing == ["SLURM_NTASKS_PER_NODE"] else ""
        raise ValueError(f"{', '.join(present)} set but not {', '.join(missing)}{hint}: a {source} launch sets "
                         f"all of {', '.join(names)}")
    rank, size, local_rank, local_size = (_number(environ, name) for name in names)
    rank_name, size_name, local_rank_name, local_size_name = names
    for value, name in ((size, size_name), (local_size, local_size_name)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")
    for value, limit, name, limit_name in ((rank, size, rank_name, size_name),
                                           (local_rank, local_size, local_rank_name, local_size_name)):
        if value >= limit:
            raise ValueError(f"{name}={value} must be below {limit_name}={limit}")
    if local_size > size:
        raise ValueError(f"{local_size_name}={local_size} exceeds {size_name}={size}: more ranks on this node "
                         "than in the whole job")
    return Placement(rank, size, local_rank, local_size, source)


def asked_gpu(environ: Mapping[str, str]) -> bool:
    return environ.get(GPU_ENV) == "1"


def device_name(placement: Placement, environ: Mapping[str, str], cuda_devices: int) -> str:
    """The device this rank trains on: a GPU of its own when the job asks for GPUs and CUDA has any, else the CPU
    (which the result records, and sanity fails where a GPU was asked for). Local ranks beyond the GPUs visible
    wrap around, as the TensorFlow path's do: a launcher may leave each rank just its own GPU."""
    if asked_gpu(environ) and cuda_devices:
        return f"cuda:{placement.local_rank % cuda_devices}"
    return "cpu"


def rendezvous_environment(placement: Placement, environ: Mapping[str, str]) -> dict[str, str]:
    """MASTER_ADDR and MASTER_PORT for init_method env://. torchrun sets them; mpirun, srun and MPIJob launches
    have the launcher export them. One rank alone needs no peer to find: it serves itself on the loopback, on a
    port the kernel picks (port 0: free by construction, no race for it)."""
    if placement.world_size == 1:
        return {"MASTER_ADDR": environ.get("MASTER_ADDR", "127.0.0.1"), "MASTER_PORT": environ.get("MASTER_PORT", "0")}
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(name)]
    if missing:
        raise ValueError(f"{' and '.join(missing)} not set: {placement.world_size} ranks (from {placement.source}) "
                         "meet at rank 0's MASTER_ADDR:MASTER_PORT, which the launcher exports to every rank")
    return {"MASTER_ADDR": environ["MASTER_ADDR"], "MASTER_PORT": environ["MASTER_PORT"]}


def init(placement: Placement, device: torch.device) -> str:
    """Join the default process group (NCCL between GPUs, Gloo between CPUs); returns the backend. Once per
    process: a second call (training, then the collectives sweep) reuses the group, since re-creating it on
    torchrun's store can find the first group's stale addresses; it is destroyed when the process exits."""
    if dist.is_initialized():
        return str(dist.get_backend())
    os.environ.update(rendezvous_environment(placement, os.environ))
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        # NCCL binds each rank's communicator to the current device.
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend, init_method="env://", rank=placement.rank,
                            world_size=placement.world_size)
    atexit.register(dist.destroy_process_group)
    return backend


def setup() -> tuple[Placement, torch.device, str]:
    """This rank's place, device and backend, joined to the others (its launcher was checked at the rank's entry)."""
    placement = rank_environment(os.environ)
    cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = torch.device(device_name(placement, os.environ, cuda_devices))
    return placement, device, init(placement, device)
