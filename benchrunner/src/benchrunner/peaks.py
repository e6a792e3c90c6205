"""The dense peak TFLOP/s of the GPUs this project knows, keyed by the product name exactly as nvidia-smi prints it
(`nvidia-smi --query-gpu=name`; `torch.cuda.get_device_name()` returns the same string).

Every figure is NVIDIA's own datasheet figure without sparsity. Where a datasheet prints only the figure "with
sparsity" (marked *), the dense figure is half of it: 2:4 structured sparsity doubles the Tensor Core rate, and NVIDIA's
datasheets state "specifications are one-half lower without sparsity". fp32 is the non-Tensor-Core FP32 rate (what an
fp32 matmul reaches with TF32 off). The forms of one GPU (SXM, PCIe, NVL) have different clocks and power limits and
are kept apart, each under the name nvidia-smi gives it.

A GPU missing here gets no peak and says why; there is never a fallback figure (a guessed peak is how MFUs of 104% to
563% get reported). A product name is entered only where it was seen as nvidia-smi prints it (`seen`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Which peak applies to a run: benchrunner.mfu.peak_precision maps a workload's precision to one of these.
PRECISIONS = ("bf16", "fp16", "tf32", "fp32")
FORMS = ("SXM", "PCIe", "NVL", "Superchip")

# The NVIDIA driver's own table of product names by PCI device id, where every name below is listed.
_DRIVER_NAMES = ("NVIDIA open-gpu-kernel-modules README, 'Compatible GPUs' table, driver 560.31.02 "
                 "(https://github.com/NVIDIA/open-gpu-kernel-modules/blob/560.31.02/README.md)")
# Products newer than driver 560 are in the same table of later drivers (seen in a public copy of driver 610.43.03's).
_DRIVER_NAMES_610 = "the same table as of driver 610.43.03"

_A100 = ("NVIDIA A100 Tensor Core GPU datasheet "
         "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): dense figures as printed (the first of 'dense | sparse')")
_H100 = ("NVIDIA H100 Tensor Core GPU datasheet "
         "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet): "
         "half the with-sparsity figures; fp32 as printed")
_H200 = ("NVIDIA H200 Tensor Core GPU datasheet "
         "(https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446; product page "
         "https://www.nvidia.com/en-us/data-center/h200/): half the with-sparsity figures; fp32 as printed")
_GH200 = ("NVIDIA GH200 Grace Hopper Superchip datasheet "
          "(https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip): the Hopper GPU's figures, half the "
          "with-sparsity figures; fp32 as printed")
_B200 = ("NVIDIA Blackwell datasheet (https://nvdam.widen.net/s/wwnsxrhm2w/blackwell-datasheet-3384703): HGX B200 "
         "column, per GPU; half the with-sparsity figures (FP16/BF16 4.5 PFLOPS, TF32 2.2 PFLOPS); fp32 as printed")
_L40S = ("NVIDIA L40S datasheet (https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413): "
         "dense figures as printed (the first of 'dense | sparse')")
_L4 = ("NVIDIA L4 Tensor Core GPU datasheet (https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet): "
       "half the with-sparsity figures; fp32 as printed")
_A10 = ("NVIDIA A10 Tensor Core GPU datasheet "
        "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf): "
        "dense figures as printed (the first of 'dense | sparse')")


@dataclass(frozen=True)
class Peak:
    """One product's dense peak TFLOP/s by precision, and where they and its name come from."""
    family: str
    form: str
    bf16: float
    fp16: float
    tf32: float
    fp32: float
    # The datasheet's title and URL, and how its figures were read.
    source: str
    # Where the product name was seen as nvidia-smi prints it.
    seen: str

    def tflops(self, precision: str) -> float:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        return getattr(self, precision)


PEAKS: dict[str, Peak] = {
    "NVIDIA A100-SXM4-40GB": Peak("A100", "SXM", 312, 312, 156, 19.5, _A100,
                                  f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA A100-SXM4-80GB": Peak("A100", "SXM", 312, 312, 156, 19.5, _A100,
                                  f"{_DRIVER_NAMES}; nvidia-smi tables and torch collect_env output recorded in "
                                  "public repositories"),
    "NVIDIA A100-PCIE-40GB": Peak("A100", "PCIe", 312, 312, 156, 19.5, _A100,
                                  f"{_DRIVER_NAMES}; nvidia-smi tables and `nvidia-smi -L` recorded in public "
                                  "repositories"),
    "NVIDIA A100 80GB PCIe": Peak("A100", "PCIe", 312, 312, 156, 19.5, _A100,
                                  f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA H100 80GB HBM3": Peak("H100", "SXM", 989.5, 989.5, 494.5, 67, _H100,
                                  "this repository's H100 record (tests/unit/fixtures/gpu-record-h100-20261124, "
                                  f"nvidia-smi -q and torch); {_DRIVER_NAMES}"),
    "NVIDIA H100 PCIe": Peak("H100", "PCIe", 756.5, 756.5, 378, 51, _H100,
                             f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA H100 NVL": Peak("H100", "NVL", 835.5, 835.5, 417.5, 60, _H100,
                            f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA H200": Peak("H200", "SXM", 989.5, 989.5, 494.5, 67, _H200,
                        f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories (143771MiB, 700 W)"),
    "NVIDIA H200 NVL": Peak("H200", "NVL", 835.5, 835.5, 417.5, 60, _H200,
                            f"{_DRIVER_NAMES_610} (PCI id 233B); nvidia-smi tables recorded in public repositories "
                            "(143771MiB, 600 W)"),
    "NVIDIA GH200 480GB": Peak("GH200", "Superchip", 989.5, 989.5, 494.5, 67, _GH200,
                               f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories (97871MiB)"),
    "NVIDIA GH200 144G HBM3e": Peak("GH200", "Superchip", 989.5, 989.5, 494.5, 67, _GH200,
                                    f"{_DRIVER_NAMES_610} (PCI id 2348); nvidia-smi and torch device names recorded "
                                    "in public repositories (146831 MiB)"),
    "NVIDIA B200": Peak("B200", "SXM", 2250, 2250, 1100, 75, _B200,
                        f"{_DRIVER_NAMES_610} (PCI id 2901); nvidia-smi tables recorded in public repositories "
                        "(183359MiB, 1000 W)"),
    "NVIDIA L40S": Peak("L40S", "PCIe", 362.05, 362.05, 183, 91.6, _L40S,
                        f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA L4": Peak("L4", "PCIe", 121, 121, 60, 30.3, _L4,
                      f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
    "NVIDIA A10": Peak("A10", "PCIe", 125, 125, 62.5, 31.2, _A10,
                       f"{_DRIVER_NAMES}; nvidia-smi tables recorded in public repositories"),
}


def lookup(product: str | None, precision: str) -> tuple[dict[str, object] | None, str | None]:
    """The peak that applies to a device of this product name at this precision, as a result records it ({"tflops",
    "product", "form", "source"}), and None; or None and why there is none. product None: the rank ran on a CPU."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if product is None:
        return None, "no GPU: this rank ran on a CPU, and benchrunner/peaks.py holds GPUs' datasheet peaks only"
    if " MIG " in product:
        # nvidia-smi names a MIG instance after its GPU ("NVIDIA B200 MIG 1g.23gb"): it has a slice of the GPU's SMs,
        # so the whole GPU's peak would overstate it.
        return None, f"{product!r} is a MIG instance, a fraction of its GPU, which has no datasheet peak"
    entry = PEAKS.get(product)
    if entry is None:
        return None, f"no peak for product {product!r} in benchrunner/peaks.py"
    return {"tflops": entry.tflops(precision), "product": product, "form": entry.form, "source": entry.source}, None
