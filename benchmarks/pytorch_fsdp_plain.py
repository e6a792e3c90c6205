#!/usr/bin/env python3
"""The peer of benchrunner's pytorch-fsdp transformer: a plain FSDP2 training loop written the way torchtitan's and
nanoGPT's train.py write theirs. The model is built on the meta device, each block compiled where asked and
`fully_shard`-ed, then the root; only then are the shards materialised on the device and initialised. AdamW (fused on
CUDA), one synthetic batch of token ids made once on the device, next-token cross-entropy, the gradients clipped to a
total norm (torchtitan's max_norm 1.0, which computes the norm benchrunner records), and no host synchronisation
inside the timed steps: the loss is read once, after the clock stops.

bfloat16 is FSDP2's MixedPrecisionPolicy (bfloat16 parameters, float32 reduction), as benchrunner's pytorch-fsdp
takes mixed_bfloat16. The decoder is benchrunner's (benchrunner.frameworks._torch.llama), so that only the loop around
it differs. Started by mpirun (make bench) or torchrun (the GPU record), see plain_ranks.py. Every rank prints one
JSON line last: its tokens/s and its last loss.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import plain_ranks
import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from benchrunner.frameworks._torch.llama import Transformer, build
from benchrunner.models import llama

# Each precision as FSDP2 keeps it: parameters cast to bfloat16 for the forward and backward, gradients reduced in
# float32; or float32 throughout.
POLICIES = {"fp32": MixedPrecisionPolicy(),
            "mixed_bfloat16": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)}
# torchtitan's default gradient clipping (its training.max_norm).
MAX_NORM = 1.0


def sharded(name: str, precision: str, compile_blocks: bool, mesh: torch.distributed.DeviceMesh,
            device: torch.device) -> Transformer:
    """The preset built on the meta device, each block (compiled first where asked) and then the root sharded over
    the mesh, then materialised on the device and initialised: no rank ever holds the whole model."""
    with torch.device("meta"):
        model = build(name)
    policy = POLICIES[precision]
    for index, block in enumerate(model.layers):
        if compile_blocks:
            block = torch.compile(block)
            model.layers.register_module(str(index), block)
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    model.to_empty(device=device)
    # The same seed on every rank: each keeps its own shard of the same initial model.
    torch.manual_seed(0)
    with torch.no_grad():
        model.init_weights()
    return model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", choices=sorted(llama.CONFIGS), default="llama-tiny")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per rank per step")
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=10)
    parser.add_argument("--precision", choices=sorted(POLICIES), default="fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile each block")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--device", choices=plain_ranks.DEVICES, default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    me = plain_ranks.join(args.device)
    device = me.device
    mesh = init_device_mesh(device.type, (me.world_size,))
    model = sharded(args.model, args.precision, args.compile, mesh, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(args.beta1, 0.999),
                                  weight_decay=args.weight_decay, fused=device.type == "cuda")
    # Ids below the vocabulary, seeded by rank: the targets are the inputs shifted by one token.
    generator = torch.Generator().manual_seed(me.rank)
    sequences = torch.randint(model.config.vocab_size, (args.batch_size, args.sequence_length + 1),
                              generator=generator).to(device)
    inputs, targets = sequences[:, :-1], sequences[:, 1:]

    def step() -> torch.Tensor:
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    model.train()
    for _ in range(args.warmup_steps):
        step()
    plain_ranks.synchronize(device)
    started = time.perf_counter()
    for _ in range(args.measured_steps):
        loss = step()
    plain_ranks.synchronize(device)
    seconds = time.perf_counter() - started
    last = loss.item()
    if not math.isfinite(last):
        raise SystemExit(f"rank {me.rank}: the last step's loss is {last}: the figure measures a broken run")
    tokens = args.batch_size * args.sequence_length * args.measured_steps
    print(json.dumps({"rank": me.rank, "size": me.world_size, "tokens_per_sec": tokens / seconds, "loss": last}),
          flush=True)
    return 0


if __name__ == "__main__":
    plain_ranks.finish(main())
