"""The training workload in PyTorch DDP: the TensorFlow path's loop, optimizer, schedule and result, in torch."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from benchrunner import results
from benchrunner.frameworks._torch import data, distributed, models, provenance
from benchrunner.frameworks.pytorch_ddp import NAME, Settings
from benchrunner.train import RunContext, learning_rate, mark, measure, measurements
from benchrunner.workload import Workload

# Autocast's type for each precision; float32 runs without autocast.
AUTOCAST_TYPES = {"fp32": None, "mixed_float16": torch.float16, "mixed_bfloat16": torch.bfloat16}


def optimizer_for(workload: Workload, parameters: Any) -> torch.optim.Optimizer:
    """The TensorFlow path's optimizers with Keras 2.15's defaults where torch's differ (Adam's epsilon). The rate
    given here is replaced before every step (learning_rate)."""
    if workload.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=workload.learning_rate, betas=(workload.momentum, 0.999), eps=1e-7)
    return torch.optim.SGD(parameters, lr=workload.learning_rate, momentum=workload.momentum)


def run(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train for warmup + measured steps; write and return this rank's result."""
    workload.validate()
    # torch was imported with this module.
    mark("framework_imported")
    placement, device, backend = distributed.setup()
    mark("ranks_joined")
    # cuDNN times its convolution algorithms once per shape and keeps the fastest, as TensorFlow's autotuning does.
    torch.backends.cudnn.benchmark = True
    memory_format = torch.channels_last if settings.channels_last else torch.contiguous_format

    module, source = models.build(workload.model, workload.image_size, workload.classes)
    module = module.to(device, memory_format=memory_format)
    parameters = models.parameter_count(module)
    # DDP broadcasts rank 0's parameters and buffers here, so every rank starts from the same weights.
    model: Any = DistributedDataParallel(module, device_ids=[device.index] if device.type == "cuda" else None)
    if settings.compile:
        # Compiled around DDP, so TorchDynamo splits the graph at DDP's gradient buckets and the allreduces still
        # overlap the backward pass.
        model = torch.compile(model)
    model.train()
    loss_fn = nn.BCEWithLogitsLoss() if workload.multi_label else nn.CrossEntropyLoss()
    optimizer = optimizer_for(workload, module.parameters())
    autocast_type = AUTOCAST_TYPES[workload.precision]
    # float16 gradients underflow without loss scaling; bfloat16 has float32's range and needs none.
    scaler = torch.amp.GradScaler(device.type, enabled=workload.precision == "mixed_float16")
    batches = data.batches(workload, settings, placement, device)
    mark("model_ready")

    def step(number: int, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
        images, labels = batch
        rate = learning_rate(workload, placement.world_size, number)
        for group in optimizer.param_groups:
            group["lr"] = rate
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_type, enabled=autocast_type is not None):
            logits = model(images)
        loss = loss_fn(logits.float(), labels)
        scaler.scale(loss).backward()  # DDP's allreduces of the gradients run during the backward pass
        scaler.step(optimizer)
        scaler.update()
        return loss.item()  # waits for the step, optimizer update included, to finish on the device

    measured = measure(workload, lambda: next(batches), step)
    finished_at = time.time()
    document = {
        "kind": results.RANK_RESULT,
        "schema_version": results.version_of(results.RANK_RESULT),
        "framework": NAME,
        "run_id": context.run_id,
        "rank": placement.rank,
        "size": placement.world_size,
        "local_rank": placement.local_rank,
        "local_size": placement.local_world_size,
        "host": socket.gethostname(),
        "workload": workload.record(),
        "model": {"name": workload.model, "parameters": parameters, "source": source, "kind": workload.kind},
        **measurements(workload, measured, context, finished_at),
        "device": {
            "asked_gpu": distributed.asked_gpu(os.environ),
            # Where the weights live, so where the steps ran: "cuda:0", or "cpu".
            "trained_on": str(next(module.parameters()).device),
            "gpus_visible": torch.cuda.device_count(),
        },
        "provenance": provenance.collect(torch, placement, backend, context, compiled=settings.compile),
    }
    results.save(results.RANK_RESULT, document, Path(context.output_dir) / f"rank-{placement.rank:05d}.json")
    return document
