"""One rank of test_fsdp_parity: the same small transformer, from the same seed, on the same token batches, trained a
few steps by the shared torch loop under DDP and under FSDP2 on the Gloo process group; writes each run's losses and
gradient norms, and what FSDP's reduction check said with Gloo's reduce-scatter working and broken (simulated),
to <output>/rank-<rank>.json. Started by test_fsdp_parity with torchrun's variables set."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from benchrunner import models
from benchrunner.frameworks import pytorch_ddp, pytorch_fsdp
from benchrunner.frameworks._torch import distributed, loop
from benchrunner.frameworks.pytorch_ddp import training as ddp
from benchrunner.frameworks.pytorch_fsdp import training as fsdp
from benchrunner.models import ModelSpec
from benchrunner.workload import Workload

VOCABULARY, DIM, LAYERS, SEQUENCE, BATCH, STEPS = 64, 32, 4, 8, 2, 3
STAND_IN = "stand-in-transformer"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class StandIn(nn.Module):
    """A decoder's outline: embedding, blocks in `layers`, norm, output head."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCABULARY, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.layers:
            x = block(x)
        return self.output(self.norm(x))


def token_batches(rank: int, count: int, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each rank's own micro-batches: token ids, and the next token of each position."""
    generator = torch.Generator().manual_seed(1000 + rank)
    sequences = [torch.randint(0, VOCABULARY, (batch, SEQUENCE + 1), generator=generator) for _ in range(count)]
    return [(s[:, :-1], s[:, 1:]) for s in sequences]


def train(wrap: loop.Wrap, workload: Workload, placement: distributed.Placement, batch: int) -> dict[str, Any]:
    torch.manual_seed(loop.MODEL_SEED)
    steps = loop.trainer(StandIn(), workload, workload.settings, placement, torch.device("cpu"), wrap)
    accumulation = workload.gradient_accumulation_steps
    batches = token_batches(placement.rank, STEPS * accumulation, batch)
    losses = [steps.step(n, batches[n * accumulation:(n + 1) * accumulation]) for n in range(STEPS)]
    checkpointed = sum(isinstance(module, loop.Checkpointed) for module in steps.module.modules())
    return {"losses": losses, "grad_norms": steps.grad_norms, "record": steps.wrapped.record,
            "checkpointed_blocks": checkpointed}


def reduction_check(mesh_settings: pytorch_fsdp.Settings, placement: distributed.Placement) -> str | float:
    try:
        return fsdp.check_gradient_average(fsdp.mesh_for(mesh_settings, placement, torch.device("cpu")),
                                           torch.device("cpu"))
    except RuntimeError as refused:
        return str(refused)


def main() -> None:
    output = Path(sys.argv[1])
    registry = models.registry()
    models.registry = lambda: {**registry, STAND_IN: ModelSpec(STAND_IN, "text")}  # type: ignore[method-assign]
    placement, _, _ = distributed.setup()
    runs: dict[str, Any] = {}
    cases = {
        "sgd": {"optimizer": "sgd", "learning_rate": 0.5},
        "adamw": {"optimizer": "adamw", "learning_rate": 0.01, "weight_decay": 0.1},
        "accumulation": {"optimizer": "sgd", "learning_rate": 0.5, "gradient_accumulation_steps": 2},
        "bf16": {"optimizer": "sgd", "learning_rate": 0.5, "precision": "mixed_bfloat16"},
    }
    for case, values in cases.items():
        for name, wrap in ((pytorch_ddp.NAME, ddp.wrap), (pytorch_fsdp.NAME, fsdp.wrap)):
            workload = Workload.from_mapping({"model": STAND_IN, "framework": name, "momentum": 0.0, **values})
            runs[f"{case}/{name}"] = train(wrap, workload, placement, BATCH)
    # One micro-batch of twice the samples: what two accumulated ones must equal.
    doubled = Workload.from_mapping({"model": STAND_IN, "framework": pytorch_ddp.NAME, "momentum": 0.0,
                                     **cases["sgd"]})
    runs["doubled/pytorch-ddp"] = train(ddp.wrap, doubled, placement, 2 * BATCH)
    for mode in ("full", "selective"):
        workload = Workload.from_mapping({"model": STAND_IN, "framework": pytorch_fsdp.NAME, "momentum": 0.0,
                                          "activation_checkpointing": mode, **cases["sgd"]})
        runs[f"checkpointing-{mode}/pytorch-fsdp"] = train(fsdp.wrap, workload, placement, BATCH)
    settings = pytorch_fsdp.Settings()
    checks: dict[str, Any] = {"working": reduction_check(settings, placement)}
    # pytorch issue 162338: Gloo's reduce-scatter summing where FSDP2 asked for the average.
    reduce_scatter = dist.reduce_scatter_single

    def summing(*args: Any, **kwargs: Any) -> Any:
        return reduce_scatter(*args, **{**kwargs, "op": dist.ReduceOp.SUM})

    dist.reduce_scatter_single = summing  # type: ignore[assignment]
    checks["broken"] = reduction_check(settings, placement)
    checks["broken_hsdp"] = reduction_check(dataclasses.replace(settings, hsdp=True), placement)
    dist.reduce_scatter_single = reduce_scatter
    (output / f"rank-{placement.rank}.json").write_text(json.dumps({"runs": runs, "checks": checks,
                                                                    "torch": torch.__version__}))


if __name__ == "__main__":
    main()
