"""The GEMM probe on the CPU: a positive TFLOP/s with the size, dtype and repeats it was measured with, in about the
time it was given."""

from __future__ import annotations

import time

import pytest
import torch

from benchrunner import mfu
from benchrunner.frameworks._torch import probe

CPU = torch.device("cpu")


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", "fp32"), ("mixed_bfloat16", "bf16")])
def test_the_probe_on_a_cpu_measures_its_precision_within_a_couple_of_seconds(precision, dtype):
    started = time.perf_counter()
    result = probe.run(CPU, precision, target_seconds=0.3)
    elapsed = time.perf_counter() - started
    assert set(result) == {"tflops", "size", "dtype", "repeats", "seconds", "device"}
    assert result["dtype"] == dtype
    assert result["size"] in probe.CPU_SIZES
    assert result["repeats"] >= round(probe.MIN_REPEATS / probe.WINDOWS)
    assert result["tflops"] == 2 * result["size"] ** 3 * result["repeats"] / result["seconds"] / 1e12
    assert result["tflops"] > 0
    assert result["device"].startswith("cpu: ") and f"{torch.get_num_threads()} threads" in result["device"]
    assert elapsed < 3


def test_the_cpu_size_is_the_largest_that_fits_the_target(monkeypatch):
    """Each size's matmul timed at 1 ms x (size/256)^3: 256 -> 1 ms, 512 -> 8 ms, 1024 -> 64 ms; eight of them fit
    0.1 s up to 512."""
    monkeypatch.setattr(probe, "_timed", lambda a, b, out, repeats: repeats * 1e-3 * (a.shape[0] / 256) ** 3)
    assert probe._cpu_size(torch.float32, 0.1) == 512
    assert probe._cpu_size(torch.float32, 10.0) == 2048
    # Even the smallest too slow: the smallest, never nothing.
    assert probe._cpu_size(torch.float32, 1e-4) == 256


def test_the_fastest_window_is_the_figure_so_a_neighbours_burst_does_not_pull_it_down(monkeypatch):
    """Estimated at 10 ms a matmul: 100 in the second, 20 a window; the third window slowed fourfold by a neighbour."""
    windows = iter([0.2, 0.2, 0.8, 0.2, 0.25])
    monkeypatch.setattr(probe, "_cpu_size", lambda dtype, target: 256)
    monkeypatch.setattr(probe, "_timed",
                        lambda a, b, out, repeats: repeats * 0.01 if repeats in (1, probe.WARMUP) else next(windows))
    result = probe.run(CPU, "fp32", target_seconds=1.0)
    assert (result["repeats"], result["seconds"]) == (20, 0.2)
    assert result["tflops"] == pytest.approx(2 * 256 ** 3 * 20 / 0.2 / 1e12)
    assert next(windows, None) is None


def test_a_cpu_size_is_judged_by_its_fastest_try(monkeypatch):
    """1024's first matmul slowed by a neighbour past the target's eighth, its second within it: 1024, not 512."""
    tries = {256: iter([0.001, 0.001]), 512: iter([0.008, 0.008]), 1024: iter([0.2, 0.06]), 2048: iter([0.5, 0.5])}
    monkeypatch.setattr(probe, "_timed", lambda a, b, out, repeats: next(tries[a.shape[0]]))
    assert probe._cpu_size(torch.float32, 1.0) == 1024


def test_the_probe_result_is_what_utilization_compares_against():
    result = probe.run(CPU, "fp32", target_seconds=0.2)
    half = result["tflops"] * 1e12 / 2
    block = mfu.utilization(half / 1000, 1000.0, None, "fp32", probe.tf32_enabled(CPU), result)
    assert block["mfu_vs_probe"] == pytest.approx(0.5)
    assert block["probe"] is result


def test_a_cpu_never_runs_tf32():
    assert not probe.tf32_enabled(CPU)
