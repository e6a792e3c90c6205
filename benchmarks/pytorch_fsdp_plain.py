#!/usr/bin/env python3
"""The peer of benchrunner's pytorch-fsdp: a plain FSDP2 pretraining loop, as torchtitan and nanoGPT write theirs
(init_process_group, the decoder built from one seed, fully_shard on each block then the root, AdamW, one synthetic
batch of tokens, next-token cross-entropy, backward and step), timed with time.perf_counter over the measured steps
after the warmup.

Started by mpirun: the rank and world size are Open MPI's, the rendezvous address is the MASTER_ADDR and
MASTER_PORT the launcher exports. The decoder is benchrunner's (benchrunner.frameworks._torch.llama), so that only
the loop around it differs. Every rank prints one JSON line last: its tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn import functional

from benchrunner.frameworks._torch.llama import build


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", default="llama-tiny")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=10)
    parser.add_argument("--precision", choices=["fp32", "mixed_bfloat16"], default="fp32")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world_size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    local_rank = int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh(device.type, (world_size,))

    torch.manual_seed(0)
    with device:
        model = build(args.model)
    bf16 = args.precision == "mixed_bfloat16"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=device.type == "cuda")
    generator = torch.Generator().manual_seed(rank)
    tokens = torch.randint(model.config.vocab_size, (args.batch_size, args.sequence_length + 1), generator=generator)
    inputs, targets = tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        return loss.item()

    model.train()
    for _ in range(args.warmup_steps):
        step()
    started = time.perf_counter()
    for _ in range(args.measured_steps):
        step()  # loss.item() waits for the step on the device
    seconds = time.perf_counter() - started
    rate = args.batch_size * args.sequence_length * args.measured_steps / seconds
    print(json.dumps({"rank": rank, "size": world_size, "tokens_per_sec": rate}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Leaves without the interpreter's teardown, as benchrunner's ranks and the plain DDP loop do.
    sys.stdout.flush()
    os._exit(code)
