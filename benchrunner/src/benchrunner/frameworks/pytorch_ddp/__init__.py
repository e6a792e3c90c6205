"""PyTorch DistributedDataParallel: the same workloads as the Horovod + TensorFlow path, trained with torch.

Importing this package imports no torch (nor TensorFlow, nor Horovod), so its settings can be read and checked
where torch is not installed; only a rank, through `train` or `allreduce`, loads torch. The modules behind those two are
named training and collectives, not train and allreduce: importing a submodule binds its name on the package,
which would replace the entry point of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchrunner.frameworks import MAX_WORKERS_PER_RANK

if TYPE_CHECKING:
    from benchrunner.train import RunContext
    from benchrunner.workload import Workload

NAME = "pytorch-ddp"
# torch.distributed's default MASTER_PORT, where rank 0's store listens when no torchrun chose one.
MASTER_PORT = "29500"
# Settings of the DataLoader that feeds real data; synthetic data is one batch made once on the device.
LOADER_KEYS = ("dataloader_workers", "pin_memory")
# Settings older results lack, with what benchrunner did before them: none, every pytorch-ddp result records them all.
BEFORE_RECORDED: dict[str, Any] = {}


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class Settings:
    """What only this framework reads, on top of the workload every framework shares."""

    # TorchDynamo splits the DDP-wrapped model's graph at DDP's gradient buckets.
    compile: bool = field(default=False, metadata=_help("torch.compile the DDP-wrapped model"))
    # NHWC tensors for the model and its input: Tensor Cores' native layout for convolutions under AMP.
    channels_last: bool = field(default=False, metadata=_help("channels-last (NHWC) model and input"))
    dataloader_workers: int = field(default=2, metadata=_help(
        "real data: DataLoader worker processes decoding images (0: in the training process)"))
    # Page-locked host batches, so the copy to the GPU is asynchronous; no effect on the CPU.
    pin_memory: bool = field(default=True, metadata=_help("real data on GPUs: page-locked host batches"))

    def problems(self, workload: Workload) -> list[str]:
        problems = []
        if not 0 <= self.dataloader_workers <= MAX_WORKERS_PER_RANK:
            problems.append(f"dataloader workers must be an integer from 0 to {MAX_WORKERS_PER_RANK} per rank, each a "
                            f"process of its own on every rank (got {self.dataloader_workers!r})")
        if workload.data == "tfrecord":
            problems.append(f"{NAME} reads no TFRecord files (a TensorFlow format): use data 'images' on the same "
                            "dataset folder, or data 'synthetic'")
        tuned = [key for key in LOADER_KEYS if getattr(self, key) != getattr(Settings(), key)]
        if workload.data == "synthetic" and tuned:
            problems.append(f"{', '.join(tuned)} tune the DataLoader of real data; synthetic data has none")
        return problems


def rank_environment(first_host: str | None) -> dict[str, str]:
    """Where rank 0's store listens, for ranks that no torchrun told (mpirun, srun, an MPIJob's mpirun)."""
    return {} if first_host is None else {"MASTER_ADDR": first_host, "MASTER_PORT": MASTER_PORT}


def model_settings(record: dict[str, Any]) -> list[str]:
    """How the model ran, as a run's page names it."""
    return [name for key, name in (("channels_last", "channels-last"), ("compile", "torch.compile")) if record.get(key)]


def input_settings(record: dict[str, Any]) -> str:
    """Real data's DataLoader, as a run's page names it."""
    return (f"DataLoader with {record['dataloader_workers']} workers, pinned memory "
            f"{'yes' if record['pin_memory'] else 'no'}")


def versions(provenance: dict[str, Any]) -> dict[str, str | None]:
    """What a run's summary names of this framework's build, from a rank's provenance."""
    torch = provenance["torch"]
    return {"torch": torch["version"], "backend": torch["backend"], "torch_built_cuda": torch.get("cuda"),
            "torch_built_cudnn": None if torch.get("cudnn") is None else str(torch["cudnn"]), "nccl": torch.get("nccl")}


def train(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train this rank for the workload's warmup + measured steps; write and return its result."""
    from benchrunner.frameworks.pytorch_ddp import training  # noqa: PLC0415 - torch loads only on ranks

    return training.run(workload, settings, context)


def allreduce(context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    """Sweep all_reduce, all_gather and reduce_scatter over message sizes; rank 0 writes the result."""
    from benchrunner.frameworks.pytorch_ddp import collectives  # noqa: PLC0415 - torch loads only on ranks

    return collectives.run(context, min_bytes, max_bytes)
