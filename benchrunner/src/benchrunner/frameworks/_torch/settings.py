"""The settings every PyTorch framework reads, on top of the workload every framework shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from benchrunner.frameworks import MAX_WORKERS_PER_RANK

if TYPE_CHECKING:
    from benchrunner.workload import Workload

# Settings of the DataLoader that feeds real data; synthetic data is one batch made once on the device.
LOADER_KEYS = ("dataloader_workers", "pin_memory")
# Which transformer blocks recompute their activations in the backward pass instead of keeping them: none, every
# block, or every other block (torchtitan's selective layer checkpointing, ac_freq 2).
ACTIVATION_CHECKPOINTING = ("none", "full", "selective")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class TorchSettings:
    """What PyTorch's frameworks read alike; each framework's Settings extends it with its own."""

    # Around DDP, TorchDynamo splits the graph at DDP's gradient buckets; a transformer is compiled block by block.
    compile: bool = field(default=False, metadata=_help("torch.compile the model (a transformer: each block)"))
    # NHWC tensors for the model and its input: Tensor Cores' native layout for convolutions under AMP.
    channels_last: bool = field(default=False, metadata=_help("channels-last (NHWC) model and input"))
    dataloader_workers: int = field(default=2, metadata=_help(
        "real data: DataLoader worker processes decoding images (0: in the training process)"))
    # Page-locked host batches, so the copy to the GPU is asynchronous; no effect on the CPU.
    pin_memory: bool = field(default=True, metadata=_help("real data on GPUs: page-locked host batches"))
    activation_checkpointing: str = field(default="none", metadata=_help(
        "text models: blocks that recompute their activations in the backward pass: none, full (every block), "
        "selective (every other block)"))

    def problems(self, workload: Workload) -> list[str]:
        problems = []
        if not 0 <= self.dataloader_workers <= MAX_WORKERS_PER_RANK:
            problems.append(f"dataloader workers must be an integer from 0 to {MAX_WORKERS_PER_RANK} per rank, each a "
                            f"process of its own on every rank (got {self.dataloader_workers!r})")
        if workload.data == "tfrecord":
            problems.append(f"{workload.framework} reads no TFRecord files (a TensorFlow format): use data 'images' "
                            "on the same dataset folder, or data 'synthetic'")
        if self.activation_checkpointing not in ACTIVATION_CHECKPOINTING:
            problems.append(f"activation checkpointing {self.activation_checkpointing!r} is not one of "
                            f"{', '.join(ACTIVATION_CHECKPOINTING)}")
        elif self.activation_checkpointing != "none" and workload.kind != "text":
            problems.append(f"activation checkpointing recomputes a transformer's blocks; {workload.model} is an "
                            f"{workload.kind} model: leave it out")
        if self.channels_last and workload.kind != "image":
            problems.append(f"channels-last lays out images' channels; {workload.model} is a {workload.kind} model: "
                            "leave it out")
        tuned = [key for key in LOADER_KEYS if getattr(self, key) != getattr(TorchSettings(), key)]
        if workload.data == "synthetic" and tuned:
            problems.append(f"{', '.join(tuned)} tune the DataLoader of real data; synthetic data has none")
        return problems
