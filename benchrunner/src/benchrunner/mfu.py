"""How close a run comes to the hardware: a transformer's model FLOPs per token, the TFLOP/s one rank's throughput
makes of them, and that as a fraction (MFU, model FLOPs utilization) of the device's datasheet peak
(benchrunner.peaks) and of what the GEMM probe measured on it before training.

Pure Python: the framework measures samples per second and runs the probe; this module does the arithmetic."""

from __future__ import annotations

import math
from typing import Any

from benchrunner import peaks

# PaLM's model FLOPs per token (Chowdhery et al. 2022, appendix B), as torchtitan and nanoGPT count them: 6 per
# non-embedding parameter (2 forward, 4 backward: one multiply-add per parameter and token, twice over backward) and
# 12 x L x H x Q x T for attention's scores and weighted sum (2 matmuls of T x Q per head and token, forward and
# backward), counted over the whole sequence as if unmasked.
FORMULA = "6*N + 12*L*H*Q*T"
TERMS = {"N": "non-embedding parameters", "L": "layers", "H": "attention heads", "Q": "head dimension",
         "T": "sequence length"}

# A workload's precision (benchrunner.workload.PRECISIONS) -> which peak applies. fp32 runs are "tf32" only where
# TF32 matmuls are enabled (peak_precision's tf32 argument).
PEAK_PRECISIONS = {"mixed_bfloat16": "bf16", "mixed_float16": "fp16", "fp32": "fp32"}

# MFU against the datasheet peak cannot pass 1: a model's arithmetic cannot outrun the chip's, so beyond it the inputs
# are wrong (a FLOPs count, a throughput, a device's name or precision) and the rank fails. Against the probe a
# little can: the probe is one GEMM shape timed for about a second before training, on clocks that boost and throttle
# with temperature and power, and a model's large GEMMs can run marginally faster than its square one. Beyond 5% the
# probe itself undershot: the device was shared while it ran (ranks probing side by side on one CPU's cores, another
# job on the GPU), which says nothing of the run. That MFU is left out (null) with the figures that gave it, and
# the run goes on.
PEAK_LIMIT = 1.0
PROBE_LIMIT = 1.05


class ImplausibleUtilization(ValueError):
    """An MFU no device can reach: the inputs are wrong, and a figure made of them would be reported as a fact."""


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} ({TERMS[name]}) must be a positive integer, not {value!r}")
    return value


def _positive_finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, not {value!r}")
    return float(value)


def flops_per_token(non_embedding_parameters: int, layers: int, heads: int, head_dim: int,
                    sequence_length: int) -> dict[str, Any]:
    """A transformer's model FLOPs per token trained, with the formula and its terms (a result's `flops` block)."""
    terms = {"N": non_embedding_parameters, "L": layers, "H": heads, "Q": head_dim, "T": sequence_length}
    for name, value in terms.items():
        _positive_int(name, value)
    per_token = 6 * terms["N"] + 12 * terms["L"] * terms["H"] * terms["Q"] * terms["T"]
    return {"per_unit": float(per_token), "formula": FORMULA, "terms": terms}


def peak_precision(precision: str, tf32: bool) -> str:
    """Which peak a workload's precision runs against: its matmuls' type (tf32 for fp32 with TF32 matmuls enabled)."""
    try:
        which = PEAK_PRECISIONS[precision]
    except KeyError:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PEAK_PRECISIONS)}") from None
    return "tf32" if which == "fp32" and tf32 else which


def _implausible(fraction: float, against: float, achieved: float, what: str, detail: str, limit: float) -> str:
    return (f"MFU {fraction:.3f} against {what} ({against:.4g} TFLOP/s; {detail}) exceeds {limit}: the model's "
            f"{achieved:.4g} TFLOP/s")


def utilization(flops_per_unit: float, samples_per_sec: float, product: str | None, precision: str, tf32: bool,
                probe: dict[str, Any] | None) -> dict[str, Any]:
    """A rank's `utilization` block: the model TFLOP/s its throughput makes, and that as a fraction of its device's
    datasheet peak (null with the reason where the table has none) and of the probe's TFLOP/s (null without a probe).

    flops_per_unit: model FLOPs per sample (flops_per_token's per_unit); samples_per_sec: this rank's throughput in
    the same unit; product: the device's name as nvidia-smi prints it, None on a CPU; precision: the workload's;
    tf32: whether fp32 matmuls ran as TF32; probe: benchrunner.frameworks._torch.probe's result on this device.
    An MFU beyond PEAK_LIMIT raises ImplausibleUtilization with the figures; one beyond PROBE_LIMIT is null, and
    mfu_vs_probe_missing says why with the figures."""
    _positive_finite("flops_per_unit", flops_per_unit)
    _positive_finite("samples_per_sec", samples_per_sec)
    which = peak_precision(precision, tf32)
    achieved = flops_per_unit * samples_per_sec / 1e12
    peak, peak_missing = peaks.lookup(product, which)
    mfu = None
    if peak is not None:
        mfu = achieved / peak["tflops"]
        if mfu > PEAK_LIMIT:
            raise ImplausibleUtilization(
                _implausible(mfu, peak["tflops"], achieved, f"the {which} peak of {product}", peak["source"], PEAK_LIMIT)
                + " cannot be right. Check the FLOPs per token, the samples per second and the device's name and "
                "precision")
    mfu_vs_probe = mfu_vs_probe_missing = None
    if probe is not None:
        if probe["dtype"] != which:
            raise ValueError(f"the probe ran {probe['dtype']} matmuls, the run {which}: MFU against it would compare "
                             "different arithmetic")
        probe_tflops = _positive_finite("probe tflops", probe["tflops"])
        mfu_vs_probe = achieved / probe_tflops
        if mfu_vs_probe > PROBE_LIMIT:
            mfu_vs_probe_missing = _implausible(
                mfu_vs_probe, probe_tflops, achieved, f"the GEMM probe on {probe['device']}",
                f"{probe['size']}x{probe['size']} {probe['dtype']}", PROBE_LIMIT) + (
                " outran it: the probe undershot (a device shared while it ran), so no MFU against it")
            mfu_vs_probe = None
    return {"model_tflops_per_device": achieved, "precision": which, "peak": peak, "peak_missing": peak_missing,
            "mfu": mfu, "probe": probe, "mfu_vs_probe": mfu_vs_probe, "mfu_vs_probe_missing": mfu_vs_probe_missing}
