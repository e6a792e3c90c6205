#!/usr/bin/python
# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_facts
short_description: Report whether a node is ready for GPUDirect RDMA, and by which route
description:
  - Decides which GPUDirect RDMA route the node can use. C(peermem) where a peer-memory client is registered as NCCL
    looks for it (C(/sys/kernel/mm/memory_peers/nv_mem/version), C(nv_mem_nc), or C(/sys/module/nvidia_peermem)),
    which needs MLNX_OFED or DOCA-OFED. C(dmabuf) where the loaded NVIDIA kernel modules are the open flavour (from
    C(/proc/driver/nvidia/version)) and the kernel is 5.12 or newer (from C(/proc/sys/kernel/osrelease)); NCCL's
    own version (2.13 or later) is the validation play's to check.
  - Reads which of C(nvidia), C(nvidia_peermem), the retired C(nv_peer_mem), C(gdrdrv) (GDRCopy), C(nvidia_fs) (GPUDirect
    Storage), C(ib_core) and C(mlx5_core) are loaded, from C(/sys/module).
  - Finds each GPU's nearest RDMA device in C(nvidia-smi topo -m) and flags GPUs whose nearest NIC is further than a
    PCIe switch (PXB), where GPUDirect RDMA loses most of its benefit.
  - On a node with GPUs and RDMA devices, a topology that cannot be read (no C(nvidia-smi), a failing one, output it
    cannot parse, no NIC in it) makes the node not ready, with the reason.
  - Changes nothing; supports check mode.
options:
  proc_root:
    description: Root of procfs; tests point it at a recorded tree.
    type: path
    default: /proc
extends_documentation_fragment:
  - hpcml.cluster.sysfs
  - hpcml.cluster.sysfs.nvidia_smi
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Learn whether GPUDirect RDMA can work here
  hpcml.cluster.gpudirect_facts:

- name: Require it on GPU nodes with InfiniBand
  ansible.builtin.assert:
    that: ansible_facts.hpcml_gpudirect.ready
    fail_msg: "{{ ansible_facts.hpcml_gpudirect.reason }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts under C(hpcml_gpudirect).
  returned: always
  type: dict
  contains:
    hpcml_gpudirect:
      description: C(ready), C(reason) when not ready, C(route) (C(peermem), C(dmabuf) or null on a node with GPUs
        and RDMA devices), C(routes) (each route's C(available) and C(reason); peermem's C(signs), dmabuf's
        C(kernel) and C(kernel_modules)), C(modules) (loaded module -> version), C(peermem_loaded),
        C(legacy_nv_peer_mem_loaded), C(gdrcopy_loaded), C(gds_loaded), C(nearest_nics) (GPU -> link and RDMA devices),
        C(gpus_far_from_nic), C(topology_error) (why nvidia-smi topo -m could not be read), C(topology_problem) (why GPU
        to NIC distances cannot be judged on a node with RDMA devices; also the C(reason) when it is the only one).
      type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, gpudirect, pci, rdma


def read_topology(module):
    smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if not smi or not os.access(smi, os.X_OK):
        return None, "nvidia-smi is not installed"
    return gpu.read_topology(module.run_command, smi)


def dmabuf_support(proc_root):
    """The DMA-BUF route's signs from procfs; a version file that names no flavour is a reason, not a pass."""
    flavour, error = None, None
    try:
        flavour = gpudirect.kernel_modules_flavour(pci.read_value(os.path.join(proc_root, "driver", "nvidia", "version")))
    except ValueError as problem:
        error = str(problem)
    release = pci.read_value(os.path.join(proc_root, "sys", "kernel", "osrelease"))
    return gpudirect.dmabuf_support(release, flavour, error)


def main():
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/sys"}, "nvidia_smi": {"type": "path"},
                       "proc_root": {"type": "path", "default": "/proc"}},
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    gpu_present = gpu.from_pci(pci.scan(root))["pci_count"] > 0
    rdma_present = bool(rdma.scan_devices(root))
    topology, error, problem = None, None, None
    if gpu_present:
        topology, error = read_topology(module)
        problem = gpudirect.topology_problem(rdma_present, topology, error)
    facts = gpudirect.summarize(gpu_present, rdma_present, gpudirect.loaded_modules(root),
                                gpudirect.nearest_nics(topology) if topology else {}, problem,
                                gpudirect.peer_memory_registered(root), dmabuf_support(module.params["proc_root"]))
    facts.update({"topology_error": error, "topology_problem": problem})
    module.exit_json(changed=False, ansible_facts={"hpcml_gpudirect": facts})


if __name__ == "__main__":
    main()
