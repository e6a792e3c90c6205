"""The training workload in PyTorch DDP: the shared torch loop (frameworks._torch.loop) around
DistributedDataParallel, which broadcasts rank 0's weights and all-reduces the gradients in the backward pass."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from benchrunner.frameworks._torch import loop
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.frameworks._torch.settings import TorchSettings
from benchrunner.frameworks.pytorch_ddp import NAME, Settings
from benchrunner.train import RunContext
from benchrunner.workload import Workload


def wrap(module: nn.Module, workload: Workload, settings: TorchSettings, placement: Placement,
         device: torch.device) -> loop.Wrapped:
    """DDP around the module, compiled whole for an image model (a transformer's blocks are compiled already)."""
    ddp = DistributedDataParallel(module, device_ids=[device.index] if device.type == "cuda" else None)
    model: Any = ddp
    if settings.compile and workload.kind == "image":
        # Compiled around DDP, so TorchDynamo splits the graph at DDP's gradient buckets and the allreduces still
        # overlap the backward pass.
        model = torch.compile(ddp)

    def gradient_sync(enabled: bool) -> Any:
        # Micro-batches before the last accumulate locally; the last one's backward all-reduces the sum.
        return nullcontext() if enabled else ddp.no_sync()

    return loop.Wrapped(model, gradient_sync, loop.AUTOCAST_TYPES[workload.precision], {"wrapper": "ddp"})


def run(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train for warmup + measured steps; write and return this rank's result."""
    return loop.run(NAME, workload, settings, context, wrap)
