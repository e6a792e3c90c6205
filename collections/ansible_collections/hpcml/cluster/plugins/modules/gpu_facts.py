#!/usr/bin/python
# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Report the NVIDIA GPUs a node really has
description:
  - Finds NVIDIA GPUs and NVSwitches on the PCI bus by vendor and class, so they are seen before any driver loads.
  - Where C(nvidia-smi) is installed and answers, adds the driver and CUDA versions, per-GPU details from
    C(nvidia-smi -q -x) and the interconnect matrix from C(nvidia-smi topo -m).
  - Changes nothing; supports check mode.
extends_documentation_fragment:
  - hpcml.cluster.sysfs
  - hpcml.cluster.sysfs.nvidia_smi
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Learn the node's GPUs
  hpcml.cluster.gpu_facts:

- name: Stop when fewer GPUs than asked for
  ansible.builtin.assert:
    that: ansible_facts.hpcml_gpu.driver_count >= 8
"""

RETURN = r"""
ansible_facts:
  description: Facts under C(hpcml_gpu).
  returned: always
  type: dict
  contains:
    hpcml_gpu:
      description: C(present), C(reason) when absent or unreadable, C(pci_count), C(pci_device_ids) (each GPU's PCI
        device ID), C(nvswitch_count), C(driver_count) (GPUs parsed from C(nvidia-smi -q -x)), C(attached_gpus) (the
        GPUs the driver says are attached; more than C(driver_count) only in a partial document), C(driver_version),
        C(cuda_version),
        C(gpus) (each with C(minor_number), the N of /dev/nvidiaN), C(topology) (with C(nics), each NIC column's RDMA
        device) and C(topology_error) (why C(topology) is null).
      type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, parsing, pci


def gather(module):
    facts = gpu.from_pci(pci.scan(module.params["sysfs_root"]))
    facts.update({"present": facts["pci_count"] > 0, "driver_count": 0, "attached_gpus": 0, "driver_version": None,
                  "cuda_version": None,
                  "gpus": [], "topology": None, "topology_error": None, "reason": None})
    if not facts["present"]:
        facts["reason"] = f"no NVIDIA GPU found on the PCI bus (vendor {pci.NVIDIA_VENDOR})"
        return facts
    smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if not smi or not os.access(smi, os.X_OK):
        facts["reason"] = f"{facts['pci_count']} NVIDIA GPU(s) on the PCI bus but nvidia-smi is not installed"
        return facts
    rc, out, err = module.run_command([smi, "-q", "-x"])
    if rc != 0:
        facts["reason"] = f"nvidia-smi failed (driver not loaded?): {(err or out).strip()}"
        return facts
    try:
        facts.update(gpu.parse_smi_xml(out))
    except parsing.ParseError as error:
        facts["reason"] = str(error)
        return facts
    facts["topology"], facts["topology_error"] = gpu.read_topology(module.run_command, smi)
    return facts


def main():
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "nvidia_smi": {"type": "path"},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts={"hpcml_gpu": gather(module)})


if __name__ == "__main__":
    main()
