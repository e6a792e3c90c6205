# -*- coding: utf-8 -*-
"""GPUDirect RDMA readiness: which of its two routes a node can use (nvidia-peermem or DMA-BUF) and how close each GPU
sits to an RDMA NIC."""

from __future__ import annotations

import os
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing, pci

# nvidia_peermem ships with the driver (>= 470); nv_peer_mem is the retired out-of-tree module that conflicts with it.
MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "gdrdrv", "nvidia_fs", "ib_core", "mlx5_core")
# nvidia-smi topo -m link types from nearest to farthest (SOC is what drivers before 384 call SYS);
# GPUDirect RDMA pays off up to PXB.
LINK_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}
GOOD_LINKS = ("PIX", "PXB")
# The two routes, as NVIDIA's GPU Operator documentation sets them side by side (NVIDIA/cloud-native-docs,
# gpu-operator/gpu-operator-rdma.rst, "Common Prerequisites", 2026-08): peermem needs MLNX_OFED or DOCA-OFED
# (nvidia-peermem.c registers with their ib_core's peer-memory API and its init returns -EINVAL without it);
# DMA-BUF needs the open kernel modules, CUDA 11.7+ (every driver of the open flavour, 515 and later), a Turing or
# newer GPU and Linux 5.12+ (ib_umem_dmabuf), and works with the distribution's rdma-core.
ROUTES = ("peermem", "dmabuf")
DMABUF_KERNEL = (5, 12)
# Where NCCL looks for a registered peer-memory client (src/transport/net_ib/gdr.cc, ibGdrSupportInitOnce): the
# same files decide here whether the peermem route is up.
PEER_MEMORY_SIGNS = ("kernel/mm/memory_peers/nv_mem/version", "kernel/mm/memory_peers/nv_mem_nc/version",
                     "module/nvidia_peermem/version")
# /proc/driver/nvidia/version names the flavour: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05
# Release Build ..." for the open modules, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05 ..." for the
# proprietary ones.
_FLAVOUR = re.compile(r"^NVRM version: NVIDIA UNIX (Open )?.*Kernel Module", re.MULTILINE)


def loaded_modules(sysfs_root="/sys"):
    """Kernel modules of interest that are loaded, with their version where the module reports one."""
    loaded = {}
    for name in MODULES:
        path = os.path.join(sysfs_root, "module", name)
        if os.path.isdir(path):
            loaded[name] = pci.read_value(os.path.join(path, "version"))
    return loaded


def peer_memory_registered(sysfs_root="/sys"):
    """The signs of a registered peer-memory client that NCCL accepts, those present."""
    return [sign for sign in PEER_MEMORY_SIGNS if os.path.exists(os.path.join(sysfs_root, sign))]


def kernel_modules_flavour(version_text: str | None) -> str | None:
    """'open' or 'proprietary' from /proc/driver/nvidia/version; None when absent (driver not loaded)."""
    if version_text is None:
        return None
    match = _FLAVOUR.search(parsing.bounded("/proc/driver/nvidia/version", version_text))
    if not match:
        raise parsing.ParseError("/proc/driver/nvidia/version has no 'NVRM version: NVIDIA UNIX ... Kernel Module' "
                                 f"line; it began {version_text.strip()[:120]!r}")
    return "open" if match.group(1) else "proprietary"


def kernel_version(release: str | None) -> tuple[int, int] | None:
    """'6.8.0-45-generic' -> (6, 8)."""
    match = re.match(r"^([0-9]{1,9})\.([0-9]{1,9})", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def dmabuf_support(release: str | None, flavour: str | None, flavour_error: str | None = None) -> dict:
    """Whether the kernel and the loaded NVIDIA modules carry the DMA-BUF route, and if not, why."""
    problems = []
    version = kernel_version(release)
    if version is None:
        problems.append(f"the kernel release could not be read ({release!r})")
    elif version < DMABUF_KERNEL:
        problems.append("kernel {} is older than {}.{}, which DMA-BUF needs".format(release, *DMABUF_KERNEL))
    if flavour_error:
        problems.append(flavour_error)
    elif flavour is None:
        problems.append("the NVIDIA kernel module is not loaded (no /proc/driver/nvidia/version)")
    elif flavour != "open":
        problems.append("the loaded NVIDIA kernel modules are the proprietary flavour; DMA-BUF needs the open ones")
    return {"available": not problems, "reason": "; ".join(problems) or None, "kernel": release,
            "kernel_modules": flavour}


def nearest_nics(topology: dict) -> dict:
    """For each GPU, its nearest RDMA device(s) and the link type between them, from a parsed `nvidia-smi topo -m`."""
    nearest = {}
    for gpu in (d for d in topology["devices"] if d.startswith("GPU")):
        row = topology["links"][gpu]
        ranked = sorted((LINK_RANK[row[column]], column) for column in topology["nics"])
        if ranked:
            best = ranked[0][0]
            nearest[gpu] = {"link": row[ranked[0][1]],
                            "nics": [topology["nics"][column] for rank, column in ranked if rank == best]}
    return nearest


def topology_problem(rdma_present: bool, topology: dict | None, error: str | None) -> str | None:
    """Why GPU-to-NIC distances cannot be judged on a node with RDMA devices; None when they can."""
    if not rdma_present:
        return None
    if error:
        return f"the GPU/NIC topology could not be read: {error}"
    if not topology["nics"]:
        return "nvidia-smi topo -m shows no NIC although the node has RDMA devices"
    return None


def summarize(gpu_present, rdma_present, modules, nearest, topology_reason=None, peer_memory=(), dmabuf=None):
    """Readiness, the route in use and the reason when there is none; topology_reason (from topology_problem) fails a
    node whose topology is unknown. peer_memory: peer_memory_registered(); dmabuf: dmabuf_support()."""
    conflict = "nv_peer_mem" in modules and "nvidia_peermem" in modules
    dmabuf = dmabuf or {"available": False, "reason": "not examined"}
    peermem = {"available": bool(peer_memory) and not conflict,
               "reason": None if peer_memory else "nvidia_peermem is not loaded (no peer-memory client registered)"}
    route = next((name for name, state in (("peermem", peermem), ("dmabuf", dmabuf)) if state["available"]), None)
    if not gpu_present:
        reason = "no NVIDIA GPU on this node"
    elif not rdma_present:
        reason = "no RDMA device on this node"
    elif "nvidia" not in modules:
        reason = "the NVIDIA kernel module is not loaded"
    elif conflict:
        reason = "both nvidia_peermem and the retired nv_peer_mem are loaded; unload nv_peer_mem"
    elif route is None:
        reason = f"neither GPUDirect RDMA route is available: peermem: {peermem['reason']}; dmabuf: {dmabuf['reason']}"
    elif topology_reason:
        reason = topology_reason
    else:
        reason = None
    return {
        "ready": reason is None,
        "reason": reason,
        "route": route if gpu_present and rdma_present else None,
        "routes": {"peermem": dict(peermem, signs=list(peer_memory)), "dmabuf": dmabuf},
        "modules": modules,
        "peermem_loaded": "nvidia_peermem" in modules,
        "legacy_nv_peer_mem_loaded": "nv_peer_mem" in modules,
        "gdrcopy_loaded": "gdrdrv" in modules,
        "gds_loaded": "nvidia_fs" in modules,
        "nearest_nics": nearest,
        "gpus_far_from_nic": sorted(gpu for gpu, near in nearest.items() if near["link"] not in GOOD_LINKS),
    }
