"""What a torch result was measured with: benchrunner.provenance's host facts, and torch's own versions and
communication backend in place of TensorFlow's and Horovod's."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from typing import Any

from benchrunner import __version__, provenance
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.train import RunContext

# torch.distributed's and Gloo's variables, recorded besides benchrunner.provenance's (NCCL_*, OMP_NUM_THREADS...):
# they change how ranks meet and talk (TORCH_NCCL_*, GLOO_SOCKET_IFNAME, the rendezvous address).
TORCH_ENV_PREFIXES = ("TORCH_", "PYTORCH_", "GLOO_", "MASTER_ADDR", "MASTER_PORT")


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    torch_own = {name: value for name, value in environ.items()
                 if name.startswith(TORCH_ENV_PREFIXES) and not any(m in name for m in provenance.SECRET_MARKERS)}
    return dict(sorted({**provenance.recorded_environment(environ), **torch_own}.items()))


def nccl_version(torch: Any) -> str | None:
    """The NCCL torch runs (its own build's, or the nvidia-nccl wheel it loaded): "2.21.5"; None without CUDA."""
    if not torch.cuda.is_available():
        return None
    return ".".join(str(part) for part in torch.cuda.nccl.version())


def collect(torch: Any, placement: Placement, backend: str, context: RunContext, *,
            compiled: bool = False, training: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rank's build and host; `training`: how its framework's wrapper and optimizer took the settings."""
    return {
        "benchrunner": {"version": __version__, "git_commit": context.git_commit},
        "python": platform.python_version(),
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "nccl": nccl_version(torch),
            "cuda_libraries": provenance.pip_cuda_libraries(),
            "backend": backend,
            "compiled": compiled,
            "launched_by": placement.source,
            **({} if training is None else {"training": training}),
        },
        "cuda_toolkit": provenance.cuda_toolkit(),
        "os": provenance.os_release(),
        "kernel": platform.release(),
        "cpu": {"model": provenance.cpu_model(), "logical_cpus": os.cpu_count() or 0,
                "cores": provenance.physical_cores(), "machine": platform.machine()},
        "memory_bytes": provenance.memory_bytes(),
        "machine_id": provenance.machine_id(),
        "node_name": provenance.node_name(),
        "gpus": [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())],
        "nvidia_driver": provenance.nvidia_driver(),
        "hcas": provenance.hcas(),
        "stack": context.stack,
        "launcher": context.launcher,
        "network": context.network,
        "container": context.container,
        "environment": environment(),
    }
