"""One rank of test_fsdp_parity: the same small decoder, from the same seed, on the same token batches, trained a
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

from benchrunner.frameworks import pytorch_ddp, pytorch_fsdp
from benchrunner.frameworks._torch import distributed, llama, loop
from benchrunner.frameworks.pytorch_ddp import training as ddp
from benchrunner.frameworks.pytorch_fsdp import training as fsdp
from benchrunner.models.llama import LlamaConfig
from benchrunner.workload import Workload

# The project's decoder (RoPE, grouped-query attention, SwiGLU, tied embeddings) in a shape small enough for two CPU
# ranks to train a dozen times over in seconds; its workload names llama-tiny, the text model it stands for.
SHAPE = LlamaConfig(dim=32, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64, norm_eps=1e-5,
                    rope_theta=10_000.0, max_seq_len=16, tied_embeddings=True)
SEQUENCE, BATCH, STEPS = 8, 2, 3


def token_batches(rank: int, count: int, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each rank's own micro-batches: token ids, and the next token of each position."""
    generator = torch.Generator().manual_seed(1000 + rank)
    sequences = [torch.randint(0, SHAPE.vocab_size, (batch, SEQUENCE + 1), generator=generator) for _ in range(count)]
    return [(s[:, :-1], s[:, 1:]) for s in sequences]


def train(wrap: loop.Wrap, workload: Workload, placement: distributed.Placement, batch: int) -> dict[str, Any]:
    cpu, accumulation = torch.device("cpu"), workload.gradient_accumulation_steps
    if workload.kind == "image":
        # The framework's own model and synthetic batches (one per rank, seeded by the rank).
        module, _ = loop.build(workload, cpu)
        images = loop.batches(workload, workload.settings, placement, cpu)
        batches = [next(images) for _ in range(STEPS * accumulation)]
    else:
        torch.manual_seed(loop.MODEL_SEED)
        module, batches = llama.Transformer(SHAPE), token_batches(placement.rank, STEPS * accumulation, batch)
    steps = loop.trainer(module, workload, workload.settings, placement, cpu, wrap, compile_blocks=wrap is fsdp.wrap)
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
    placement, _, _ = distributed.setup()
    runs: dict[str, Any] = {}
    cases = {
        "sgd": {"optimizer": "sgd", "learning_rate": 0.5},
        "adamw": {"optimizer": "adamw", "learning_rate": 0.01, "weight_decay": 0.1},
        "accumulation": {"optimizer": "sgd", "learning_rate": 0.5, "gradient_accumulation_steps": 2},
        # A smaller rate: bfloat16's rounding differs between FSDP2's bf16 parameters and DDP's autocast, and a large
        # SGD step would carry that difference into the next steps' losses.
        "bf16": {"optimizer": "sgd", "learning_rate": 0.05, "precision": "mixed_bfloat16"},
        # FSDP shards an image model's top-level children.
        "image": {"model": "small_cnn", "image_size": 16, "batch_size": 4, "optimizer": "sgd", "learning_rate": 0.1},
    }
    for case, values in cases.items():
        for name, wrap in ((pytorch_ddp.NAME, ddp.wrap), (pytorch_fsdp.NAME, fsdp.wrap)):
            workload = Workload.from_mapping({"model": "llama-tiny", "framework": name, "momentum": 0.0, **values})
            runs[f"{case}/{name}"] = train(wrap, workload, placement, BATCH)
    # One micro-batch of twice the samples: what two accumulated ones must equal.
    doubled = Workload.from_mapping({"model": "llama-tiny", "framework": pytorch_ddp.NAME, "momentum": 0.0,
                                     **cases["sgd"]})
    runs["doubled/pytorch-ddp"] = train(ddp.wrap, doubled, placement, 2 * BATCH)
    for mode in ("full", "selective"):
        workload = Workload.from_mapping({"model": "llama-tiny", "framework": pytorch_fsdp.NAME, "momentum": 0.0,
                                          "activation_checkpointing": mode, **cases["sgd"]})
        runs[f"checkpointing-{mode}/pytorch-fsdp"] = train(fsdp.wrap, workload, placement, BATCH)
    # HSDP: both ranks on one node (shards only), and each rank a node of its own (replicas only: FSDP2 all-reduces).
    for nodes, local in (("one-node", 2), ("two-nodes", 1)):
        workload = Workload.from_mapping({"model": "llama-tiny", "framework": pytorch_fsdp.NAME, "momentum": 0.0,
                                          "hsdp": True, **cases["sgd"]})
        runs[f"hsdp-{nodes}/pytorch-fsdp"] = train(fsdp.wrap, workload,
                                                   dataclasses.replace(placement, local_world_size=local), BATCH)
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
