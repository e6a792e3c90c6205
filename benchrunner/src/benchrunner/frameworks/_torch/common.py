"""What every PyTorch framework module declares alike: where its ranks meet, and how a run's page names its settings
and build."""

from __future__ import annotations

from typing import Any

# torch.distributed's default MASTER_PORT, where rank 0's store listens when no torchrun chose one.
MASTER_PORT = "29500"


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
