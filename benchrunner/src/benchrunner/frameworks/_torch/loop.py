"""The training both torch frameworks run: the model built alike on every rank, its blocks checkpointed and compiled,
the step (micro-batches with gradient accumulation, the loss, the total gradient norm, the optimizer), and the rank's
result. A framework gives only its wrapper (`Wrap`): DistributedDataParallel, or FSDP2's fully_shard."""

from __future__ import annotations

import math
import os
import resource
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.nn import functional
from torch.utils.checkpoint import checkpoint

from benchrunner import mfu, results
from benchrunner import models as catalogue
from benchrunner.frameworks._torch import data, distributed, models, probe, provenance, tokens
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.frameworks._torch.settings import TorchSettings
from benchrunner.train import RunContext, learning_rate, mark, measure, measurements
from benchrunner.workload import Workload

# Autocast's type for each precision; float32 runs without autocast.
AUTOCAST_TYPES = {"fp32": None, "mixed_float16": torch.float16, "mixed_bfloat16": torch.bfloat16}
# Every rank builds the model from this seed, so all start from the same weights: DDP would broadcast rank 0's
# anyway, but FSDP2 keeps each rank's own shard of what that rank built.
MODEL_SEED = 0
# torchtitan's selective layer checkpointing at its default frequency: every second block (the 2nd, the 4th, ...).
SELECTIVE_EVERY = 2


@dataclass
class Wrapped:
    """What a framework's wrapper made of the module: the model to call, and how it trains."""

    model: Any
    # Turns the gradients' reduction across ranks off (False) for the micro-batches before the last, on (True) for it.
    gradient_sync: Callable[[bool], AbstractContextManager[None]]
    # Autocast's type around the forward pass; None where the wrapper casts (FSDP2's MixedPrecisionPolicy) or fp32.
    autocast: torch.dtype | None
    # The wrapper's own record: its settings as they took effect.
    record: dict[str, Any] = field(default_factory=dict)


Wrap = Callable[[nn.Module, Workload, Any, Placement, torch.device], Wrapped]


class Checkpointed(nn.Module):
    """A block whose activations are recomputed in the backward pass instead of being kept from the forward."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # Non-reentrant: the variant that works with torch.compile, FSDP2 and keyword arguments.
        return checkpoint(self.block, *args, use_reentrant=False, **kwargs)


def blocks(module: nn.Module, kind: str) -> nn.Module:
    """The container of the model's repeated units: a transformer's blocks (`layers`, as torchtitan names them);
    an image model's top-level children."""
    return module.layers if kind == "text" else module


def units(module: nn.Module, kind: str) -> list[tuple[str, nn.Module]]:
    """The units a block-wise wrapper treats alone (FSDP2's shards, per-block compile): those with parameters."""
    return [(name, child) for name, child in blocks(module, kind).named_children()
            if any(True for _ in child.parameters())]


def prepare_blocks(module: nn.Module, kind: str, settings: TorchSettings, compile_blocks: bool) -> nn.Module:
    """Activation checkpointing, then torch.compile, block by block (torchtitan's order: the compiled graph includes
    the recomputation), before any wrapper. A transformer is always compiled block by block; an image model where
    `compile_blocks` says so, else its framework compiles it whole, around its wrapper."""
    if kind == "image" and not compile_blocks:
        return module
    container = blocks(module, kind)
    for index, (name, block) in enumerate(units(module, kind)):
        if settings.activation_checkpointing == "full" or (
                settings.activation_checkpointing == "selective" and (index + 1) % SELECTIVE_EVERY == 0):
            block = Checkpointed(block)
        if settings.compile:
            block = torch.compile(block)
        container.register_module(name, block)
    return module


def optimizer_for(workload: Workload, parameters: Any, device: torch.device) -> tuple[torch.optim.Optimizer, bool]:
    """The workload's optimizer, and whether it runs fused (one kernel for all parameters: AdamW on CUDA). SGD and
    Adam keep the TensorFlow path's Keras 2.15 defaults where torch's differ (Adam's epsilon). The rate given here is
    replaced before every step (learning_rate)."""
    if workload.optimizer == "adamw":
        fused = device.type == "cuda"
        return torch.optim.AdamW(parameters, lr=workload.learning_rate, betas=(workload.momentum, 0.999),
                                 weight_decay=workload.weight_decay, fused=fused), fused
    if workload.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=workload.learning_rate, betas=(workload.momentum, 0.999), eps=1e-7), False
    return torch.optim.SGD(parameters, lr=workload.learning_rate, momentum=workload.momentum), False


def loss_of(workload: Workload, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over every position (text); cross-entropy, or per-finding binary cross-entropy for
    multi-label data (images). In float32 whatever the forward's precision."""
    if workload.kind == "text":
        return functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
    if workload.multi_label:
        return functional.binary_cross_entropy_with_logits(logits.float(), targets)
    return functional.cross_entropy(logits.float(), targets)


def total_norm(module: nn.Module) -> torch.Tensor:
    """The L2 norm of all the module's gradients together, across shards where they are sharded (DTensors: their
    norm is a partial one until full_tensor() sums the shards' squares over the ranks); left on the device."""
    norm = torch.nn.utils.get_total_norm([p.grad for p in module.parameters() if p.grad is not None])
    return norm.full_tensor() if isinstance(norm, DTensor) else norm


def finite(value: float) -> float | None:
    """JSON has no NaN or Infinity: a non-finite figure is recorded as null (sanity fails the run on it)."""
    return value if math.isfinite(value) else None


@dataclass
class Trainer:
    """One optimizer step at a time over a list of micro-batches; keeps each step's total gradient norm."""

    workload: Workload
    module: nn.Module
    wrapped: Wrapped
    optimizer: torch.optim.Optimizer
    device: torch.device
    world_size: int
    grad_norms: list[float | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        # float16 gradients underflow without loss scaling; bfloat16 has float32's range and needs none.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.workload.precision == "mixed_float16")

    def step(self, number: int, micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
        """Forward and backward every micro-batch (gradients reduced across ranks only in the last's backward), then
        the gradient norm and the optimizer's update; returns the step's loss, the micro-batches' mean."""
        rate = learning_rate(self.workload, self.world_size, number)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        self.optimizer.zero_grad(set_to_none=True)
        autocast = self.wrapped.autocast
        loss_sum = torch.zeros((), device=self.device)
        for index, (inputs, targets) in enumerate(micro_batches):
            last = index == len(micro_batches) - 1
            with self.wrapped.gradient_sync(last):
                with torch.autocast(self.device.type, dtype=autocast, enabled=autocast is not None):
                    logits = self.wrapped.model(inputs)
                # Each micro-batch's share, so the accumulated gradient is the mean over the step's samples.
                loss = loss_of(self.workload, logits, targets) / len(micro_batches)
                self.scaler.scale(loss).backward()
            loss_sum += loss.detach()
        self.scaler.unscale_(self.optimizer)
        norm = total_norm(self.module)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        # Read after the update is queued, so the norm costs no wait in the middle of the step.
        self.grad_norms.append(finite(norm.item()))
        return loss_sum.item()  # waits for the step, optimizer update included, to finish on the device


def build(workload: Workload, device: torch.device) -> tuple[nn.Module, str]:
    """The workload's model on the device, built from MODEL_SEED by its family's torch builder; and who defined it."""
    torch.manual_seed(MODEL_SEED)
    return models.build(workload, device)


def batches(workload: Workload, settings: TorchSettings, placement: Placement,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(input, target) micro-batches: images and labels, or token ids below the model's vocabulary and the next
    token of each position."""
    if workload.kind == "text":
        return tokens.batches(workload, catalogue.get(workload.model).vocab_size, placement, device)
    return data.batches(workload, settings, placement, device)


def trainer(module: nn.Module, workload: Workload, settings: TorchSettings, placement: Placement,
            device: torch.device, wrap: Wrap, compile_blocks: bool = False) -> Trainer:
    """The module's blocks prepared, wrapped by the framework, and its optimizer (over the wrapped parameters:
    FSDP2's shards): ready to step."""
    wrapped = wrap(prepare_blocks(module, workload.kind, settings, compile_blocks), workload, settings, placement,
                   device)
    module.train()
    optimizer, fused = optimizer_for(workload, module.parameters(), device)
    wrapped.record["optimizer_fused"] = fused
    return Trainer(workload, module, wrapped, optimizer, device, placement.world_size)


def memory(device: torch.device) -> dict[str, Any]:
    """The rank's peak memory: the GPU's allocations, or the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return {"peak_bytes": torch.cuda.max_memory_allocated(device), "source": "torch.cuda.max_memory_allocated"}
    # Linux reports ru_maxrss in KiB.
    return {"peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "source": "ru_maxrss"}


def arithmetic(workload: Workload, samples_per_sec: float, device: torch.device,
               gemm: dict[str, Any] | None) -> dict[str, Any]:
    """A rank's `flops` and `utilization`: a transformer's model FLOPs per token, and the TFLOP/s and MFU its
    throughput makes of them against the device's peak and the probe; null for image models (no FLOPs count for
    CNNs yet)."""
    if workload.kind != "text":
        return {"flops": None, "utilization": None}
    flops = catalogue.flops(workload.model, workload.sequence_length)
    product = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {"flops": flops, "utilization": mfu.utilization(flops["per_unit"], samples_per_sec, product,
                                                           workload.precision, probe.tf32_enabled(device), gemm)}


def run(name: str, workload: Workload, settings: TorchSettings, context: RunContext, wrap: Wrap,
        joined: Callable[[Placement, torch.device], None] = lambda placement, device: None,
        compile_blocks: bool = False) -> dict[str, Any]:
    """Train for warmup + measured steps with the framework's wrapper; write and return this rank's result.
    `joined` runs once the ranks have joined, before the model is built (FSDP's check of its reduction);
    `compile_blocks`: an image model is compiled child by child (FSDP's units) rather than whole."""
    workload.validate()
    # torch was imported with this module.
    mark("framework_imported")
    placement, device, backend = distributed.setup()
    joined(placement, device)
    mark("ranks_joined")
    # cuDNN times its convolution algorithms once per shape and keeps the fastest, as TensorFlow's autotuning does.
    torch.backends.cudnn.benchmark = True
    # The TFLOP/s this device reaches in the run's precision, before the model takes its memory (text models: what
    # their MFU is measured against beside the datasheet's peak).
    gemm = probe.run(device, workload.precision) if workload.kind == "text" else None
    module, source = build(workload, device)
    if settings.channels_last:
        module = module.to(memory_format=torch.channels_last)
    parameters = models.parameter_count(module)
    steps = trainer(module, workload, settings, placement, device, wrap, compile_blocks)
    micro_batches = batches(workload, settings, placement, device)
    mark("model_ready")

    measured = measure(workload, lambda: [next(micro_batches) for _ in range(workload.gradient_accumulation_steps)],
                       steps.step)
    finished_at = time.time()
    measured_metrics = measurements(workload, measured, context, finished_at)
    document = {
        "kind": results.RANK_RESULT,
        "schema_version": results.version_of(results.RANK_RESULT),
        "framework": name,
        "run_id": context.run_id,
        "rank": placement.rank,
        "size": placement.world_size,
        "local_rank": placement.local_rank,
        "local_size": placement.local_world_size,
        "host": socket.gethostname(),
        "workload": workload.record(),
        "model": {"name": workload.model, "parameters": parameters, "source": source, "kind": workload.kind},
        **measured_metrics,
        "grad_norms": steps.grad_norms,
        **arithmetic(workload, measured_metrics["metrics"]["samples_per_sec"], device, gemm),
        "memory": memory(device),
        "device": {
            "asked_gpu": distributed.asked_gpu(os.environ),
            # Where the weights live, so where the steps ran: "cuda:0", or "cpu".
            "trained_on": str(next(module.parameters()).device),
            "gpus_visible": torch.cuda.device_count(),
        },
        "provenance": provenance.collect(torch, placement, backend, context, compiled=settings.compile,
                                         training=steps.wrapped.record),
    }
    results.save(results.RANK_RESULT, document, Path(context.output_dir) / f"rank-{placement.rank:05d}.json")
    return document
