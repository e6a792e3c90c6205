"""PyTorch DistributedDataParallel: the same workloads as the Horovod + TensorFlow path, trained with torch.

Importing this package imports no torch (nor TensorFlow, nor Horovod), so its settings can be read and checked
where torch is not installed; only a rank, through `train` or `allreduce`, loads torch. The modules behind those two are
named training and collectives, not train and allreduce: importing a submodule binds its name on the package,
which would replace the entry point of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchrunner.frameworks._torch.common import input_settings, model_settings, rank_environment, versions
from benchrunner.frameworks._torch.settings import TorchSettings

__all__ = ["NAME", "Settings", "allreduce", "input_settings", "model_settings", "rank_environment", "train",
           "versions"]

if TYPE_CHECKING:
    from benchrunner.train import RunContext
    from benchrunner.workload import Workload

NAME = "pytorch-ddp"
KINDS = ("image", "text")
# Settings older results lack, with what benchrunner did before them: none, every pytorch-ddp result records them all.
BEFORE_RECORDED: dict[str, Any] = {}


@dataclass(frozen=True)
class Settings(TorchSettings):
    """What DDP reads: PyTorch's shared settings, nothing of its own."""


def train(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train this rank for the workload's warmup + measured steps; write and return its result."""
    from benchrunner.frameworks.pytorch_ddp import training  # noqa: PLC0415 - torch loads only on ranks

    return training.run(workload, settings, context)


def allreduce(context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    """Sweep all_reduce, all_gather and reduce_scatter over message sizes; rank 0 writes the result."""
    from benchrunner.frameworks._torch import collectives  # noqa: PLC0415 - torch loads only on ranks

    return collectives.run(NAME, context, min_bytes, max_bytes)
