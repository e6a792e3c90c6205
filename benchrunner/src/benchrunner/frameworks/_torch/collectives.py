"""A sweep of torch.distributed's collectives over message sizes, timed as nccl-tests times them.

all_reduce, all_gather and reduce_scatter; per size, `count` operations back to back on the device after one
untimed pass of them, one synchronisation, the slowest rank's time. Bandwidths follow nccl-tests'
doc/PERFORMANCE.md: algbw = bytes / time; busbw = algbw * 2(n-1)/n for all_reduce and algbw * (n-1)/n for
all_gather and reduce_scatter, the rate each link carries in a ring, comparable across rank counts. nccl-tests
counts an all_gather's bytes as its whole output (n parts) and a reduce_scatter's as its whole input, and so does
this: each point's `bytes` is n times the part each rank sends or keeps (for all_reduce, the message itself).
"""

from __future__ import annotations

import datetime as dt
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from benchrunner import results, watchdog
from benchrunner.frameworks._torch import distributed, provenance
from benchrunner.sweep import bus_bandwidth, iterations_for, sizes
from benchrunner.train import RunContext

# torch 2.13 deprecates all_gather_into_tensor and reduce_scatter_tensor for these names; older releases have only
# the former.
ALL_GATHER_TENSOR = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_TENSOR = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

# (message bytes, ranks, device) -> (the bytes bandwidth is counted over, one operation on buffers made once).
Prepare = Callable[[int, int, torch.device], tuple[int, Callable[[], Any]]]


def prepare_all_reduce(size: int, ranks: int, device: torch.device) -> tuple[int, Callable[[], Any]]:
    # Zeros summed stay zeros: no overflow to infinity however many ranks and operations.
    tensor = torch.zeros(size // 4, device=device)
    return size, lambda: dist.all_reduce(tensor)


def _parts(size: int, ranks: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One rank's part and the whole of n parts: whole float32 elements per rank, at least one (as nccl-tests
    divides a size that ranks do not divide evenly)."""
    part = torch.zeros(max(1, size // 4 // ranks), device=device)
    return part, torch.zeros(part.numel() * ranks, device=device)


def prepare_all_gather(size: int, ranks: int, device: torch.device) -> tuple[int, Callable[[], Any]]:
    part, whole = _parts(size, ranks, device)
    return whole.numel() * 4, lambda: ALL_GATHER_TENSOR(whole, part)


def prepare_all_gather_list(size: int, ranks: int, device: torch.device) -> tuple[int, Callable[[], Any]]:
    """all_gather into n tensors (views of one buffer), for backends without the single-tensor form."""
    part, whole = _parts(size, ranks, device)
    parts = list(whole.chunk(ranks))
    return whole.numel() * 4, lambda: dist.all_gather(parts, part)


def prepare_reduce_scatter(size: int, ranks: int, device: torch.device) -> tuple[int, Callable[[], Any]]:
    part, whole = _parts(size, ranks, device)
    return whole.numel() * 4, lambda: REDUCE_SCATTER_TENSOR(part, whole)


def unsupported(operation: Callable[[], Any]) -> str | None:
    """Run the operation once; why the backend refuses it, or None. A backend refuses an operation it lacks
    before any message is sent, on every rank alike ("Backend gloo does not support reduce_scatter"); any other
    failure is raised."""
    try:
        operation()
    except RuntimeError as exc:
        if "does not support" not in str(exc):
            raise
        return str(exc)
    return None


def seconds_per_operation(operation: Callable[[], Any], count: int, synchronize: Callable[[], Any]) -> float:
    """This rank's seconds per operation: `count` of them queued back to back, one synchronisation after the
    last, after an untimed pass of the same (connections made, buffers registered, kernels loaded)."""
    for _ in range(count):
        operation()
    synchronize()
    started = time.perf_counter()
    for _ in range(count):
        operation()
    synchronize()
    return (time.perf_counter() - started) / count


def slowest(seconds: float, device: torch.device) -> float:
    """The largest of every rank's seconds: the slowest rank sets a collective's time."""
    value = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def sweep(prepare: Prepare, byte_sizes: list[int], ranks: int, device: torch.device,
          bus_factor: float) -> list[dict[str, Any]]:
    # Gloo's operations return when done; NCCL's are queued on the GPU, which must then be waited for.
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    points = []
    for size in byte_sizes:
        counted, operation = prepare(size, ranks, device)
        count = iterations_for(size)
        seconds = slowest(seconds_per_operation(operation, count, synchronize), device)
        algbw = counted / seconds
        points.append({"bytes": counted, "iterations": count, "time_s": seconds, "algbw_bytes_per_s": algbw,
                       "busbw_bytes_per_s": algbw * bus_factor})
        watchdog.advance()
    return points


def run(framework: str, context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    byte_sizes = sizes(min_bytes, max_bytes)
    placement, device, backend = distributed.setup()
    ranks = placement.world_size
    # all_reduce's bus factor is 2(n-1)/n; all_gather's and reduce_scatter's (n-1)/n: in a ring each rank's link
    # carries all but its own part of the whole.
    points = sweep(prepare_all_reduce, byte_sizes, ranks, device, bus_bandwidth(1.0, ranks))
    share = (ranks - 1) / ranks
    gather_call, prepare_gather = ALL_GATHER_TENSOR.__name__, prepare_all_gather
    if unsupported(prepare_all_gather(byte_sizes[0], ranks, device)[1]):
        gather_call, prepare_gather = dist.all_gather.__name__, prepare_all_gather_list
    collectives: dict[str, Any] = {
        "all_gather": {"call": gather_call, "points": sweep(prepare_gather, byte_sizes, ranks, device, share)}}
    refused = unsupported(prepare_reduce_scatter(byte_sizes[0], ranks, device)[1])
    collectives["reduce_scatter"] = {"skipped": refused} if refused else {
        "call": REDUCE_SCATTER_TENSOR.__name__,
        "points": sweep(prepare_reduce_scatter, byte_sizes, ranks, device, share)}
    document = {
        "kind": results.ALLREDUCE_RESULT,
        "schema_version": results.SCHEMA_VERSION,
        "framework": framework,
        "run_id": context.run_id,
        "ranks": ranks,
        "host": socket.gethostname(),
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "points": points,
        "collectives": collectives,
        "provenance": provenance.collect(torch, placement, backend, context),
    }
    if placement.rank == 0:
        results.save(results.ALLREDUCE_RESULT, document, Path(context.output_dir) / results.SWEEP_JSON)
    return document
