"""Model FLOPs per token, the precision whose peak applies, and MFU: checked against a hand count, against nanoGPT's
published figures, and refused where no device could reach it."""

from __future__ import annotations

import math

import pytest

from benchrunner import mfu, peaks, workload

# nanoGPT's transformer_sizing.ipynb (github.com/karpathy/nanoGPT, commit 0bb96d3), GPT-2 124M: 12 layers, 12 heads,
# width 768, 1024 tokens, vocabulary 50257, tied embeddings. Its PaLM estimate counts all 124,337,664 parameters as N
# and prints "palm_flops: 879894724608" for one sequence; its matmul-by-matmul count prints 874944921600 (forward and
# backward); and 100 sequences in 0.755 s on an A100 at 312 TFLOP/s bf16 give "fraction of A100 used: 37.14%".
GPT2_PARAMETERS = 124_337_664
GPT2_PALM_FLOPS_PER_SEQUENCE = 879_894_724_608
GPT2_COUNTED_FLOPS_PER_SEQUENCE = 874_944_921_600
GPT2_A100_FRACTION = 0.3714


def hand_count(layers: int, width: int, heads: int, sequence: int, vocabulary: int) -> tuple[int, int]:
    """A GPT-style decoder's parameters (tied embedding, norms left out) and training FLOPs per token, counted matmul
    by matmul as 2 FLOPs per multiply-add, the backward pass twice the forward."""
    per_layer = {"qkv": width * 3 * width, "out": width * width, "up": width * 4 * width, "down": 4 * width * width}
    parameters = layers * sum(per_layer.values()) + vocabulary * width
    forward = 2 * layers * sum(per_layer.values())            # every weight once per token
    forward += layers * 2 * sequence * width                   # scores: this token's query against T keys, all heads
    forward += layers * 2 * sequence * width                   # the weighted sum of T values
    forward += 2 * width * vocabulary                          # logits through the tied embedding
    assert width % heads == 0
    return parameters, 3 * forward


def test_the_formula_is_the_hand_count_of_a_small_decoder():
    layers, width, heads, sequence, vocabulary = 2, 32, 4, 16, 100
    parameters, counted = hand_count(layers, width, heads, sequence, vocabulary)
    flops = mfu.flops_per_token(parameters, layers, heads, width // heads, sequence)
    assert flops["per_unit"] == counted == 178_944
    assert flops["formula"] == "6*N + 12*L*H*Q*T"
    assert flops["terms"] == {"N": parameters, "L": 2, "H": 4, "Q": 8, "T": 16}


def test_gpt2_124m_has_nanogpts_published_palm_flops():
    flops = mfu.flops_per_token(GPT2_PARAMETERS, 12, 12, 64, 1024)
    assert flops["per_unit"] * 1024 == GPT2_PALM_FLOPS_PER_SEQUENCE
    # Within 0.6% of nanoGPT's matmul-by-matmul count, as its notebook finds (ratio 1.0057).
    assert flops["per_unit"] * 1024 / GPT2_COUNTED_FLOPS_PER_SEQUENCE == pytest.approx(1.0057, abs=5e-5)


def test_gpt2_124m_on_an_a100_has_nanogpts_published_fraction():
    tokens_per_sec = 100 * 1024 / 0.755
    block = mfu.utilization(GPT2_COUNTED_FLOPS_PER_SEQUENCE / 1024, tokens_per_sec, "NVIDIA A100-SXM4-40GB",
                            "mixed_bfloat16", False, None)
    assert block["mfu"] == pytest.approx(GPT2_A100_FRACTION, abs=5e-5)
    assert block["precision"] == "bf16"
    assert block["peak"]["tflops"] == 312
    assert block["model_tflops_per_device"] == pytest.approx(GPT2_A100_FRACTION * 312, rel=2e-4)


@pytest.mark.parametrize("term", ["non_embedding_parameters", "layers", "heads", "head_dim", "sequence_length"])
@pytest.mark.parametrize("value", [0, -1, 2.0, True])
def test_a_term_that_is_not_a_positive_count_is_refused_by_name(term, value):
    arguments = {"non_embedding_parameters": 1000, "layers": 2, "heads": 4, "head_dim": 8, "sequence_length": 16}
    arguments[term] = value
    with pytest.raises(ValueError, match="must be a positive integer"):
        mfu.flops_per_token(**arguments)


def test_every_workload_precision_has_a_peak_precision():
    assert set(mfu.PEAK_PRECISIONS) == set(workload.PRECISIONS)
    assert set(mfu.PEAK_PRECISIONS.values()) | {"tf32"} == set(peaks.PRECISIONS)


@pytest.mark.parametrize(("precision", "tf32", "expected"), [
    ("fp32", False, "fp32"), ("fp32", True, "tf32"), ("mixed_bfloat16", False, "bf16"), ("mixed_bfloat16", True, "bf16"),
    ("mixed_float16", False, "fp16"), ("mixed_float16", True, "fp16")])
def test_the_peak_follows_the_matmuls_type(precision, tf32, expected):
    assert mfu.peak_precision(precision, tf32) == expected


def test_an_unknown_precision_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="mixed_bfloat16, mixed_float16, fp32"):
        mfu.peak_precision("bf16", False)


def probe_result(tflops: float, dtype: str = "bf16") -> dict:
    return {"tflops": tflops, "size": 8192, "dtype": dtype, "repeats": 600, "seconds": 1.0,
            "device": "NVIDIA H100 80GB HBM3"}


def test_utilization_against_the_peak_and_the_probe():
    # Llama 3.1 8B's shape at sequence 4096 (32 layers, 32 heads of 128); N its 8,030,261,248 parameters less the
    # 525,336,576 of its token embedding (the output projection is a matmul and counts), as torchtitan counts.
    flops = mfu.flops_per_token(7_504_924_672, 32, 32, 128, 4096)["per_unit"]
    block = mfu.utilization(flops, 8000.0, "NVIDIA H100 80GB HBM3", "mixed_bfloat16", False, probe_result(700.0))
    achieved = flops * 8000 / 1e12
    assert block == {"model_tflops_per_device": achieved, "precision": "bf16",
                     "peak": peaks.lookup("NVIDIA H100 80GB HBM3", "bf16")[0], "peak_missing": None,
                     "mfu": achieved / 989.5, "probe": probe_result(700.0), "mfu_vs_probe": achieved / 700.0,
                     "mfu_vs_probe_missing": None}
    assert 0.41 < block["mfu"] < 0.42


def test_a_cpu_has_no_peak_and_says_why_but_has_its_probe():
    block = mfu.utilization(1e6, 1000.0, None, "fp32", False, probe_result(0.002, "fp32"))
    assert block["peak"] is None and block["mfu"] is None
    assert "CPU" in block["peak_missing"]
    assert block["mfu_vs_probe"] == pytest.approx(0.5)


def test_a_gpu_missing_from_the_table_has_no_mfu_and_no_fallback():
    block = mfu.utilization(1e9, 1000.0, "NVIDIA GeForce RTX 4090", "mixed_bfloat16", False, None)
    assert (block["peak"], block["mfu"], block["probe"], block["mfu_vs_probe"]) == (None, None, None, None)
    assert block["peak_missing"] == "no peak for product 'NVIDIA GeForce RTX 4090' in benchrunner/peaks.py"


def test_an_mfu_above_one_against_the_peak_is_refused_with_the_figures():
    """330 TFLOP/s on an A100 whose datasheet says 312: the inputs are wrong, and no result is made of them."""
    with pytest.raises(mfu.ImplausibleUtilization, match=r"MFU 1\.058 against the bf16 peak of NVIDIA A100-SXM4-80GB "
                                                         r"\(312 TFLOP/s.*330 TFLOP/s"):
        mfu.utilization(330e12 / 1000, 1000.0, "NVIDIA A100-SXM4-80GB", "mixed_bfloat16", False, None)


def test_an_mfu_of_exactly_one_is_accepted():
    assert mfu.utilization(312e9, 1000.0, "NVIDIA A100-SXM4-80GB", "mixed_bfloat16", False, None)["mfu"] == 1.0


def test_against_the_probe_a_few_per_cent_above_one_is_kept_and_more_is_left_out_saying_why():
    """A probe that ran while its device was shared undershoots: the MFU against it is left out, the run goes on."""
    kept = mfu.utilization(520e9, 1000.0, None, "mixed_bfloat16", False, probe_result(500.0))
    assert (kept["mfu_vs_probe"], kept["mfu_vs_probe_missing"]) == (1.04, None)
    left_out = mfu.utilization(550e9, 1000.0, None, "mixed_bfloat16", False, probe_result(500.0))
    assert left_out["mfu_vs_probe"] is None
    assert left_out["mfu_vs_probe_missing"].startswith("MFU 1.100 against the GEMM probe on ")
    assert "(500 TFLOP/s; " in left_out["mfu_vs_probe_missing"] and "the probe undershot" in left_out["mfu_vs_probe_missing"]
    assert left_out["model_tflops_per_device"] == pytest.approx(550.0)


def test_a_probe_of_another_precision_is_refused():
    with pytest.raises(ValueError, match="the probe ran fp32 matmuls, the run tf32"):
        mfu.utilization(1e9, 1000.0, "NVIDIA H100 80GB HBM3", "fp32", True, probe_result(50.0, "fp32"))


@pytest.mark.parametrize("rate", [0.0, -5.0, math.nan, math.inf])
def test_a_throughput_that_is_not_a_positive_number_is_refused(rate):
    with pytest.raises(ValueError, match="samples_per_sec must be a positive finite number"):
        mfu.utilization(1e9, rate, None, "fp32", False, None)
