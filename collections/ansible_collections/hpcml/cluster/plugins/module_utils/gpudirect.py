# -*- coding: utf-8 -*-
"""GPUDirect RDMA readiness: which peer-memory modules are loaded and how close each GPU sits to an RDMA NIC."""

from __future__ import annotations

import os

from ansible_collections.hpcml.cluster.plugins.module_utils import pci

# nvidia_peermem ships with the driver (>= 470); nv_peer_mem is the retired out-of-tree module that conflicts with it.
MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "gdrdrv", "nvidia_fs", "ib_core", "mlx5_core")
# nvidia-smi topo -m link types from nearest to farthest (SOC is what drivers before 384 call SYS);
# GPUDirect RDMA pays off up to PXB.
LINK_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}
GOOD_LINKS = ("PIX", "PXB")


def loaded_modules(sysfs_root="/sys"):
    """Kernel modules of interest that are loaded, with their version where the module reports one."""
    loaded = {}
    for name in MODULES:
        path = os.path.join(sysfs_root, "module", name)
        if os.path.isdir(path):
            loaded[name] = pci.read_value(os.path.join(path, "version"))
    return loaded


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


def summarize(gpu_present, rdma_present, modules, nearest, topology_reason=None):
    """Readiness and its reason; topology_reason (from topology_problem) fails a node whose topology is unknown."""
    conflict = "nv_peer_mem" in modules and "nvidia_peermem" in modules
    if not gpu_present:
        reason = "no NVIDIA GPU on this node"
    elif not rdma_present:
        reason = "no RDMA device on this node"
    elif "nvidia" not in modules:
        reason = "the NVIDIA kernel module is not loaded"
    elif "nvidia_peermem" not in modules and "nv_peer_mem" not in modules:
        reason = "nvidia_peermem is not loaded"
    elif conflict:
        reason = "both nvidia_peermem and the retired nv_peer_mem are loaded; unload nv_peer_mem"
    elif topology_reason:
        reason = topology_reason
    else:
        reason = None
    return {
        "ready": reason is None,
        "reason": reason,
        "modules": modules,
        "peermem_loaded": "nvidia_peermem" in modules,
        "legacy_nv_peer_mem_loaded": "nv_peer_mem" in modules,
        "gdrcopy_loaded": "gdrdrv" in modules,
        "gds_loaded": "nvidia_fs" in modules,
        "nearest_nics": nearest,
        "gpus_far_from_nic": sorted(gpu for gpu, near in nearest.items() if near["link"] not in GOOD_LINKS),
    }
