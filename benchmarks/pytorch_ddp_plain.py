#!/usr/bin/env python3
"""The peer of benchrunner's PyTorch path: a plain DistributedDataParallel training loop, in the style of PyTorch's
own examples (init_process_group, the model on its device wrapped in DDP, SGD, one synthetic batch, backward and
step), timed with time.perf_counter over the measured steps after the warmup.

Started by mpirun (make bench) or torchrun (the GPU record): the rank and world size are the launcher's, the
rendezvous address the MASTER_ADDR and MASTER_PORT it exports (plain_ranks.py). The network is benchrunner's
(benchrunner.frameworks._torch.cnn), so that only the loop around it differs. Every rank prints one JSON line
last: its images/s.
"""

from __future__ import annotations

import argparse
import json
import time

import plain_ranks
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from benchrunner.frameworks._torch.cnn import build
from benchrunner.frameworks._torch.loop import AUTOCAST_TYPES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=10)
    parser.add_argument("--precision", choices=sorted(AUTOCAST_TYPES), default="fp32")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--device", choices=plain_ranks.DEVICES, default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    me = plain_ranks.join(args.device)
    device = me.device
    torch.backends.cudnn.benchmark = True
    model, _ = build(args.model, args.image_size, args.num_classes)
    model = DDP(model.to(device), device_ids=[me.local_rank] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    autocast_type = AUTOCAST_TYPES[args.precision]
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "mixed_float16")
    images = torch.rand(args.batch_size, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(args.num_classes, (args.batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad()
        with torch.autocast(device.type, dtype=autocast_type, enabled=autocast_type is not None):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    model.train()
    for _ in range(args.warmup_steps):
        step()
    plain_ranks.synchronize(device)
    started = time.perf_counter()
    for _ in range(args.measured_steps):
        step()
    plain_ranks.synchronize(device)
    seconds = time.perf_counter() - started
    print(json.dumps({"rank": me.rank, "size": me.world_size,
                      "images_per_sec": args.batch_size * args.measured_steps / seconds}), flush=True)
    return 0


if __name__ == "__main__":
    plain_ranks.finish(main())
