# -*- coding: utf-8 -*-
"""GPUDirect RDMA readiness: which peer-memory modules are loaded and how close each GPU sits to an RDMA NIC."""

from __future__ import annotations

import os

from ansible_collections.hpcml.cluster.plugins.module_utils import pci

# nvidia_peermem ships with the driver (>= 470); nv_peer_mem is the retired out-of-tree module that conflicts with it.
MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "gdrdrv", "nvidia_fs", "ib_core", "mlx5_core")
# nvidia-smi topo -m link types from nearest to farthest; GPUDirect RDMA pays off up to PXB.
LINK_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
GOOD_LINKS = ("PIX", "PXB")


def loaded_modules(sysfs_root="/sys"):
    """Kernel modules of interest that are loaded, with their version where the module reports one."""
    loaded = {}
    for name in MODULES:
        path = os.path.join(sysfs_root, "module", name)
        if os.path.isdir(path):
            loaded[name] = pci.read_value(os.path.join(path, "version"))
    return loaded


def nearest_nics(topology):
    """For each GPU, its nearest NIC(s) and the link type between them, from a parsed `nvidia-smi topo -m`."""
    if not topology:
        return {}
    nics = [d for d in topology["devices"] if not d.startswith("GPU")]
    nearest = {}
    for gpu in (d for d in topology["devices"] if d.startswith("GPU")):
        row = topology["links"].get(gpu, {})
        ranked = sorted((LINK_ORDER.index(row[nic]), nic) for nic in nics if row.get(nic) in LINK_ORDER)
        if ranked:
            best = ranked[0][0]
            nearest[gpu] = {"link": LINK_ORDER[best], "nics": [nic for rank, nic in ranked if rank == best]}
    return nearest


def summarize(gpu_present, rdma_present, modules, nearest):
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
