"""The peak table: every entry sourced, its forms kept apart, and a product it lacks given a reason, never a number."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from benchrunner import peaks

REPOSITORY = Path(__file__).resolve().parents[2]
H100_RECORD = REPOSITORY / "tests" / "unit" / "fixtures" / "gpu-record-h100-20261124"


def test_every_entry_has_a_datasheet_source_with_its_address_and_where_its_name_was_seen():
    for product, entry in peaks.PEAKS.items():
        assert re.search(r"datasheet \(https://\S+", entry.source), product
        assert entry.seen, product
        assert entry.form in peaks.FORMS, product


def test_every_figure_is_positive_and_tensor_cores_outrun_the_fp32_units():
    for product, entry in peaks.PEAKS.items():
        assert entry.fp32 > 0, product
        # Dense Tensor Core rates: bf16 and fp16 alike on every datacenter part listed, twice TF32's (to the
        # datasheets' rounding: B200's TF32 is printed as 2.2 PFLOPS with sparsity, its BF16 as 4.5).
        assert entry.bf16 == entry.fp16 == pytest.approx(2 * entry.tf32, rel=0.03), product
        assert entry.tf32 > entry.fp32, product


def test_the_forms_of_one_gpu_are_kept_apart():
    """Within a family, the form decides the figures: the same form always has the same peak and every different
    peak is a different form (H100 SXM, PCIe and NVL are three)."""
    figures: dict[tuple[str, str], set[tuple[float, ...]]] = defaultdict(set)
    for entry in peaks.PEAKS.values():
        figures[entry.family, entry.form].add((entry.bf16, entry.fp16, entry.tf32, entry.fp32))
    assert all(len(found) == 1 for found in figures.values()), figures
    forms = {family: {form for found_family, form in figures if found_family == family} for family, _ in figures}
    assert forms["H100"] == {"SXM", "PCIe", "NVL"}
    assert forms["H200"] == {"SXM", "NVL"}
    assert forms["A100"] == {"SXM", "PCIe"}


def test_the_h100_this_project_recorded_has_its_sxm_peak():
    """The product name comes from the repository's own H100 record, exactly as nvidia-smi -q printed it."""
    recorded = re.search(r"Product Name\s+: (.+)", (H100_RECORD / "nvidia-smi-q.txt").read_text()).group(1)
    peak, missing = peaks.lookup(recorded, "bf16")
    assert missing is None
    assert peak == {"tflops": 989.5, "product": "NVIDIA H100 80GB HBM3", "form": "SXM",
                    "source": peaks.PEAKS["NVIDIA H100 80GB HBM3"].source}


@pytest.mark.parametrize(("precision", "tflops"), [("bf16", 756.5), ("fp16", 756.5), ("tf32", 378), ("fp32", 51)])
def test_lookup_gives_the_figure_of_the_precision(precision, tflops):
    peak, missing = peaks.lookup("NVIDIA H100 PCIe", precision)
    assert (peak["tflops"], peak["form"], missing) == (tflops, "PCIe", None)


def test_a_product_missing_from_the_table_gets_the_reason_not_a_number():
    peak, missing = peaks.lookup("NVIDIA GeForce RTX 4090", "bf16")
    assert peak is None
    assert missing == "no peak for product 'NVIDIA GeForce RTX 4090' in benchrunner/peaks.py"


def test_a_name_close_to_an_entry_is_not_matched_loosely():
    """No substring matching: 'NVIDIA H100' (another SKU's name in the driver's table) is not the SXM part."""
    assert peaks.lookup("NVIDIA H100", "bf16")[0] is None
    assert peaks.lookup("nvidia h100 80gb hbm3", "bf16")[0] is None


def test_a_mig_instance_gets_no_peak_of_its_whole_gpu():
    peak, missing = peaks.lookup("NVIDIA B200 MIG 1g.23gb", "bf16")
    assert peak is None
    assert "MIG instance" in missing


def test_a_cpu_gets_the_reason():
    peak, missing = peaks.lookup(None, "fp32")
    assert peak is None
    assert "CPU" in missing


def test_an_unknown_precision_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="bf16, fp16, tf32, fp32"):
        peaks.lookup("NVIDIA H100 80GB HBM3", "fp8")
