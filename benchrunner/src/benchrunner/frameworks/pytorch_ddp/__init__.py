"""PyTorch DistributedDataParallel: the same workloads as the Horovod + TensorFlow path, trained with torch.

Importing this package imports no torch (nor TensorFlow, nor Horovod), so its settings can be read and checked
where torch is not installed; only a rank, through `train` or `allreduce`, loads torch. The modules behind those two are
named training and collectives, not train and allreduce: importing a submodule binds its name on the package,
which would replace the entry point of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchrunner.train import RunContext
    from benchrunner.workload import Workload

NAME = "pytorch-ddp"

# Workload settings that only the TensorFlow and Horovod path reads: set for this framework they would be
# recorded with a run they did not shape.
TENSORFLOW_ONLY = ("xla", "fusion_threshold_mb", "cycle_time_ms", "fp16_allreduce", "hierarchical_allreduce",
                   "cache", "prefetch_to_device", "num_parallel_calls", "interleave_cycle_length")
# Settings of the DataLoader that feeds real data; synthetic data is one batch made once on the device.
LOADER_KEYS = ("dataloader_workers", "pin_memory")


@dataclass(frozen=True)
class Settings:
    """What only this framework reads, on top of the workload every framework shares."""

    # torch.compile the DDP-wrapped model (TorchDynamo splits its graph at DDP's gradient buckets).
    compile: bool = False
    # NHWC tensors for the model and its input: Tensor Cores' native layout for convolutions under AMP.
    channels_last: bool = False
    # DataLoader worker processes decoding real data (0: decoded in the training process itself).
    dataloader_workers: int = 2
    # Page-locked host batches for real data, so the copy to the GPU is asynchronous; no effect on the CPU.
    pin_memory: bool = True

    def problems(self, workload: Workload) -> list[str]:
        problems = []
        for key in ("compile", "channels_last", "pin_memory"):
            if not isinstance(getattr(self, key), bool):
                problems.append(f"{key} must be true or false (got {getattr(self, key)!r})")
        workers = self.dataloader_workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            problems.append(f"dataloader workers must be an integer >= 0 (got {workers!r})")
        if workload.data == "tfrecord":
            problems.append(f"{NAME} reads no TFRecord files (a TensorFlow format): use data 'images' on the same "
                            "dataset folder, or data 'synthetic'")
        tuned = [key for key in LOADER_KEYS if getattr(self, key) != getattr(Settings(), key)]
        if workload.data == "synthetic" and tuned:
            problems.append(f"{', '.join(tuned)} tune the DataLoader of real data; synthetic data has none")
        # The workload's own class gives the defaults, so this module needs no import of benchrunner.workload.
        default = type(workload)()
        foreign = [key for key in TENSORFLOW_ONLY if getattr(workload, key) != getattr(default, key)]
        if foreign:
            problems.append(f"{', '.join(foreign)} tune TensorFlow and Horovod; {NAME} does not read them")
        return problems


def train(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train this rank for the workload's warmup + measured steps; write and return its result."""
    from benchrunner.frameworks.pytorch_ddp import training  # noqa: PLC0415 - torch loads only on ranks

    return training.run(workload, settings, context)


def allreduce(context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    """Sweep all_reduce, all_gather and reduce_scatter over message sizes; rank 0 writes the result."""
    from benchrunner.frameworks.pytorch_ddp import collectives  # noqa: PLC0415 - torch loads only on ranks

    return collectives.run(context, min_bytes, max_bytes)
