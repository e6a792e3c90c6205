"""A collective's sweep over message sizes, whichever framework times it: the sizes, how often each is repeated,
and nccl-tests' bus bandwidth, so Horovod's and torch.distributed's figures are comparable."""

from __future__ import annotations

# The allreduce sweep's default message sizes, in bytes.
MIN_BYTES = 8
MAX_BYTES = 256 * 1024 * 1024


def allreduce_bounds_problem(min_bytes: int, max_bytes: int) -> str | None:
    """Why these bounds make no sweep: the messages are float32 tensors, so sizes are whole 4-byte elements."""
    if min_bytes < 4 or max_bytes < min_bytes or min_bytes % 4:
        return (f"allreduce message sizes must satisfy 4 <= min <= max bytes with min a multiple of 4 (float32 "
                f"elements), got min {min_bytes}, max {max_bytes}")
    return None


def sizes(min_bytes: int = MIN_BYTES, max_bytes: int = MAX_BYTES) -> list[int]:
    """Powers of two from min_bytes to max_bytes."""
    problem = allreduce_bounds_problem(min_bytes, max_bytes)
    if problem:
        raise ValueError(problem)
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= 2
    return out


def bus_bandwidth(algbw: float, ranks: int) -> float:
    return algbw * 2 * (ranks - 1) / ranks


def iterations_for(size: int, budget_bytes: int = 1 << 30, most: int = 100, least: int = 5) -> int:
    """Many iterations for small messages, few for large, so each size takes a similar time."""
    return max(least, min(most, budget_bytes // max(size, 1)))
