"""What a result was measured with: software versions, hardware, launch context."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

# Environment variables that change how training communicates; recorded with every result.
RECORDED_ENV_PREFIXES = ("NCCL_", "HOROVOD_", "UCX_", "OMPI_MCA_", "TF_", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
# Values of variables whose names contain these are never recorded.
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def os_release(path: str = "/etc/os-release") -> str:
    try:
        with open(path) as handle:
            fields = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
    except OSError:
        return platform.platform()
    return fields.get("PRETTY_NAME", "unknown").strip('"')


def cpu_model(path: str = "/proc/cpuinfo") -> str:
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def physical_cores(path: str = "/proc/cpuinfo") -> int | None:
    """Distinct (physical id, core id) pairs: cores, not hyperthreads; None where the kernel does not say (some VMs
    and architectures)."""
    cores, processor = set(), {}
    try:
        with open(path) as handle:
            for line in [*handle, "\n"]:
                if not line.strip():
                    if "core id" in processor:
                        cores.add((processor.get("physical id"), processor["core id"]))
                    processor = {}
                elif ":" in line:
                    key, value = line.split(":", 1)
                    processor[key.strip()] = value.strip()
    except OSError:
        return None
    return len(cores) or None


def memory_bytes(path: str = "/proc/meminfo") -> int | None:
    """The node's memory (MemTotal, which the kernel gives in KiB despite writing "kB")."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# machine-id(5) (systemd 259): "a single newline-terminated, hexadecimal, 32-character, lowercase ID", not all zeros,
# and confidential: it is recorded only as an ID derived for this application, as sd_id128_get_machine_app_specific
# does (HMAC-SHA256 keyed by the machine ID), so two ranks on one machine still record the same value.
MACHINE_ID = re.compile(r"[0-9a-f]{32}")
MACHINE_APP_ID = b"benchrunner machine"
# Set from the pod's spec.nodeName (Kubernetes downward API) where ranks run in pods: a container's /etc/machine-id
# is its image's, or none, so there the node name is what tells two machines apart.
NODE_NAME_ENV = "BENCHRUNNER_NODE_NAME"


def machine_id(path: str = "/etc/machine-id") -> str | None:
    """This machine's ID for benchrunner (32 hex digits), or None where /etc/machine-id is absent, empty (not yet
    made at first boot), "uninitialized", or not an ID."""
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if not MACHINE_ID.fullmatch(text) or not text.strip("0"):
        return None
    return hmac.new(bytes.fromhex(text), MACHINE_APP_ID, hashlib.sha256).hexdigest()[:32]


def node_name(environ: dict[str, str] | None = None) -> str | None:
    return (os.environ if environ is None else environ).get(NODE_NAME_ENV) or None


def recorded_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    return {
        name: value for name, value in sorted(environ.items())
        if name.startswith(RECORDED_ENV_PREFIXES) and not any(m in name for m in SECRET_MARKERS)
    }


def loaded_mpi_library(maps: str) -> str | None:
    """The libmpi this process mapped (from /proc/self/maps text), whichever launcher started it."""
    found = re.search(r"(/\S*/libmpi\.so[.0-9]*)$", maps, re.MULTILINE)
    return found.group(1) if found else None


def mpi_version(hvd: Any) -> str | None:
    """The MPI library's own version (MPI_Get_library_version), when Horovod runs on MPI: "Open MPI v4.1.4"."""
    if not hvd.mpi_enabled():
        return None
    try:
        library = loaded_mpi_library(Path("/proc/self/maps").read_text())
        if library:
            mpi = ctypes.CDLL(library)
            text = ctypes.create_string_buffer(8192)  # MPI_MAX_LIBRARY_VERSION_STRING is at most this
            length = ctypes.c_int()
            if mpi.MPI_Get_library_version(text, ctypes.byref(length)) == 0:
                return text.value.decode(errors="replace").split(",")[0].strip()
    except (OSError, AttributeError):
        pass
    return "MPI (version unknown)"


def nccl_version(code: int) -> str | None:
    """NCCL_VERSION_CODE as Horovod reports it: major*10000 + minor*100 + patch since NCCL 2.9, else *1000."""
    if not code:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def nvidia_driver(path: str = "/sys/module/nvidia/version") -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def cuda_toolkit(path: str = "/usr/local/cuda/version.json") -> str | None:
    """The system toolkit's release, from the version.json NVIDIA's installers write (e.g. "12.2.20230823")."""
    try:
        with open(path) as handle:
            return str(json.load(handle)["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pip_cuda_libraries(distributions: Any = None) -> dict[str, str]:
    """NVIDIA's CUDA wheels in this environment (tensorflow[and-cuda]'s pins), name -> version; TensorFlow loads these
    before the system's (its libraries' RUNPATH names site-packages/nvidia/*/lib)."""
    found = {}
    for dist in metadata.distributions() if distributions is None else distributions:
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def hcas(root: str = "/sys/class/infiniband") -> list[dict[str, Any]]:
    """RDMA devices and their ports: link layer, state and rate, as the kernel reports them."""
    found = []
    for device in sorted(Path(root).glob("*")):
        ports = [{"port": int(port.name), "state": _read(port / "state"), "rate": _read(port / "rate"),
                  "link_layer": _read(port / "link_layer")}
                 for port in sorted((device / "ports").glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0)
                 if port.name.isdigit()]
        found.append({"name": device.name, "board_id": _read(device / "board_id"),
                      "fw_ver": _read(device / "fw_ver"), "ports": ports})
    return found
