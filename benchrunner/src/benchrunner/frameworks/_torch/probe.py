"""The GEMM probe: the TFLOP/s this rank's device really reaches on a square matmul in the run's precision, measured
before training, so that MFU can be given against what the device does as well as against its datasheet (and on a
CPU, which has no datasheet peak here, only against this).

Timed as nccl-tests times a collective: warmup, then back-to-back repeats with one synchronisation at the end, so the
figure is the device's throughput and not the launch latency of each matmul. The repeats are split into WINDOWS
windows and the fastest one counts: what the device reaches is its best sustained rate, and one window that a
neighbour's burst slowed (another job's process on the same cores, a clock dip) would otherwise pull the whole figure
down, and the run's MFU against it up."""

from __future__ import annotations

import time
from typing import Any

import torch

from benchrunner import mfu, provenance

# Large enough for a GPU's plateau (tile and wave quantisation cost a few per cent at 4096 on an H100) and about
# 1.1 TFLOP per matmul, so a second holds hundreds of them.
GPU_SIZE = 8192
# A CPU's rate differs by orders of magnitude between dtypes (bf16 without AVX512-BF16 or AMX runs ~100x slower than
# fp32: 0.9 against 130 GFLOP/s on this project's 2-core AMD EPYC build machine), so its size is the largest of these
# whose timed loop still holds MIN_REPEATS matmuls in the target time.
CPU_SIZES = (256, 512, 1024, 2048)
TARGET_SECONDS = 1.0
MIN_REPEATS = 8
# Timed matmuls after the first (which pays for cuBLAS's handle and kernel choice), to estimate how many fit the target.
WARMUP = 3
# The timed repeats are split into this many windows, the fastest of which is the figure.
WINDOWS = 5
# Tries of one matmul per CPU size, the fastest counting: one slowed by a neighbour would pick a smaller size.
SIZE_TRIES = 2

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}


def tf32_enabled(device: torch.device) -> bool:
    """Whether fp32 matmuls on this device run as TF32 (torch >= 2.9's fp32_precision, which the legacy
    allow_tf32 and set_float32_matmul_precision also set; reading allow_tf32 raises once both APIs were used)."""
    return device.type == "cuda" and torch.backends.cuda.matmul.fp32_precision == "tf32"


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, repeats: int) -> float:
    """Seconds for `repeats` back-to-back matmuls, synchronised once at the end."""
    start = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b, out=out)
    _synchronize(a.device)
    return time.perf_counter() - start


def _operands(size: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, generator=generator, dtype=dtype, device=device)
    b = torch.randn(size, size, generator=generator, dtype=dtype, device=device)
    return a, b, torch.empty(size, size, dtype=dtype, device=device)


def _cpu_size(dtype: torch.dtype, target_seconds: float) -> int:
    """The largest of CPU_SIZES whose one matmul (the fastest of SIZE_TRIES), measured from the smallest up, fits
    MIN_REPEATS times in the target (the smallest if none does). The size that fails costs at most SIZE_TRIES x 8
    times the limit: time grows as the cube."""
    device = torch.device("cpu")
    chosen = CPU_SIZES[0]
    for size in CPU_SIZES:
        a, b, out = _operands(size, dtype, device)
        if min(_timed(a, b, out, 1) for _ in range(SIZE_TRIES)) * MIN_REPEATS > target_seconds:
            break
        chosen = size
    return chosen


def run(device: torch.device, precision: str, *, target_seconds: float = TARGET_SECONDS) -> dict[str, Any]:
    """Probe this device in the workload's precision (fp32 as TF32 where TF32 matmuls are enabled) for about
    target_seconds; a result's `probe` block: {"tflops", "size", "dtype", "repeats", "seconds", "device"}, repeats
    and seconds being the fastest window's.

    Run before training: on a GPU it resets the peak-memory counter, so the rank's recorded peak is training's and not
    the probe's three matrices."""
    dtype = mfu.peak_precision(precision, tf32_enabled(device))
    if device.type == "cuda":
        size, name = GPU_SIZE, torch.cuda.get_device_name(device)
    else:
        size = _cpu_size(DTYPES[dtype], target_seconds)
        name = f"cpu: {provenance.cpu_model()}, {torch.get_num_threads()} threads"
    a, b, out = _operands(size, DTYPES[dtype], device)
    _timed(a, b, out, 1)
    estimate = _timed(a, b, out, WARMUP) / WARMUP
    repeats = max(1, round(max(MIN_REPEATS, target_seconds / estimate) / WINDOWS))
    seconds = min(_timed(a, b, out, repeats) for _ in range(WINDOWS))
    del a, b, out
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    return {"tflops": 2 * size ** 3 * repeats / seconds / 1e12, "size": size, "dtype": dtype, "repeats": repeats,
            "seconds": seconds, "device": name}
