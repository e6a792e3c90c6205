"""PyTorch FSDP2 (`fully_shard`): the PyTorch path's workloads with parameters, gradients and optimizer state
sharded over the ranks, each transformer block a unit of its own, then the root.

Importing this package imports no torch; only a rank, through `train` or `allreduce`, loads it. Its training module
is named training, not train, so that importing it does not replace the entry point of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchrunner.frameworks._torch.common import input_settings, model_settings, rank_environment, versions
from benchrunner.frameworks._torch.settings import TorchSettings

__all__ = ["NAME", "Settings", "allreduce", "input_settings", "model_settings", "rank_environment", "train",
           "versions"]

if TYPE_CHECKING:
    from benchrunner.train import RunContext
    from benchrunner.workload import Workload

NAME = "pytorch-fsdp"
KINDS = ("image", "text")
# Settings older results lack: none, pytorch-fsdp is newer than every result on disk.
BEFORE_RECORDED: dict[str, Any] = {}


@dataclass(frozen=True)
class Settings(TorchSettings):
    """What FSDP2 reads besides PyTorch's shared settings: how its shards are kept and where they live."""

    # After a unit's forward its gathered parameters are freed, and gathered again for its backward: less memory, one
    # more all-gather per unit and step (ZeRO-3); False keeps them to the backward (ZeRO-2's memory, no re-gather).
    reshard_after_forward: bool = field(default=True, metadata={
        "help": "free each unit's gathered parameters after its forward, gather them again for the backward"})
    # Hybrid sharding: shards within a node (its fast links), replicas across nodes (gradients all-reduced).
    hsdp: bool = field(default=False, metadata={
        "help": "shard within each node, replicate across nodes (2-D mesh of nodes x local ranks)"})

    def problems(self, workload: Workload) -> list[str]:
        problems = super().problems(workload)
        if workload.precision == "mixed_float16":
            # float16 parameters need a loss scaler that unscales sharded gradients; bfloat16 has float32's range and
            # needs none, and every GPU FSDP2 targets computes in it.
            problems.append(f"{NAME} trains in fp32 or mixed_bfloat16 (bfloat16 parameters, float32 reduction); "
                            "mixed_float16 would need a sharded loss scaler: use mixed_bfloat16")
        return problems


def train(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train this rank for the workload's warmup + measured steps; write and return its result."""
    from benchrunner.frameworks.pytorch_fsdp import training  # noqa: PLC0415 - torch loads only on ranks

    return training.run(workload, settings, context)


def allreduce(context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    """Sweep all_reduce, all_gather and reduce_scatter over message sizes: FSDP's own collectives; rank 0 writes."""
    from benchrunner.frameworks._torch import collectives  # noqa: PLC0415 - torch loads only on ranks

    return collectives.run(NAME, context, min_bytes, max_bytes)
