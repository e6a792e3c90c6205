"""PyTorch DistributedDataParallel: placeholder until the framework's modules land."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAME = "pytorch-ddp"
# torch.distributed's default MASTER_PORT (torchrun's too).
MASTER_PORT = "29500"


@dataclass(frozen=True)
class Settings:
    compile: bool = field(default=False, metadata={"help": "torch.compile the model"})
    channels_last: bool = field(default=False, metadata={"help": "channels-last memory format"})
    dataloader_workers: int = field(default=2, metadata={"help": "real data: DataLoader worker processes"})
    pin_memory: bool = field(default=True, metadata={"help": "real data on GPUs: pinned host memory"})

    def problems(self, workload: Any) -> list[str]:
        return []


def rank_environment(first_host: str | None) -> dict[str, str]:
    """Where rank 0's store listens, for ranks that no torchrun told (mpirun, srun, an MPIJob)."""
    return {} if first_host is None else {"MASTER_ADDR": first_host, "MASTER_PORT": MASTER_PORT}


def versions(provenance: dict[str, Any]) -> dict[str, str | None]:
    """What a run's summary names of this framework's build, from a rank's provenance."""
    torch = provenance["torch"]
    return {"torch": torch["version"], "backend": torch["backend"], "torch_built_cuda": torch.get("cuda"),
            "torch_built_cudnn": None if torch.get("cudnn") is None else str(torch["cudnn"]), "nccl": torch.get("nccl")}
