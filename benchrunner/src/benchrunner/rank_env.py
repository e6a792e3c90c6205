"""What a launcher tells every rank through its environment, beside the rank program's own options."""

from __future__ import annotations

from collections.abc import Mapping

LAUNCHED_AT_ENV = "BENCHRUNNER_LAUNCHED_AT"
# `benchrunner rank` runs the program these arguments name (train or allreduce).
RANK_ARGV_ENV = "BENCHRUNNER_RANK_ARGV"
# "1" when the job asks every rank to train on a GPU of its own: the rank records where it trained, and sanity fails
# a run whose ranks asked for a GPU and trained on the CPU.
GPU_ENV = "BENCHRUNNER_GPU"

# What tells a rank its place, in the order they are looked for, each as (rank, world size, local rank, local world
# size). torchrun's come first: under Slurm its ranks also inherit the SLURM_* of the srun task their agent is. Open
# MPI's come before Slurm's: mpirun inside a Slurm allocation inherits the allocation's SLURM_*.
LAUNCHER_VARIABLES: tuple[tuple[str, tuple[str, str, str, str]], ...] = (
    ("torchrun", ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")),
    ("openmpi", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE")),
    ("slurm", ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")),
)
# No launcher's variables: one process started by hand.
SINGLE = "single"


def variables_source(environ: Mapping[str, str]) -> str:
    """Whose variables this process found first (torchrun, openmpi, slurm), or single where it found none."""
    for source, names in LAUNCHER_VARIABLES:
        if any(name in environ for name in names):
            return source
    return SINGLE
