#!/usr/bin/python
# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Report the RDMA adapters (InfiniBand / RoCE) a node really has
description:
  - Finds Mellanox/NVIDIA network adapters on the PCI bus by vendor and class.
  - Reads each RDMA device under C(/sys/class/infiniband) for its ports' state, physical state, link layer and rate.
  - Where C(ibv_devinfo) is installed, adds each port's transport, active MTU and LIDs as the verbs library sees them.
  - Changes nothing; supports check mode.
options:
  ibv_devinfo:
    description: Path of ibv_devinfo; found on PATH when not given.
    type: path
extends_documentation_fragment:
  - hpcml.cluster.sysfs
author: hpcml
"""

EXAMPLES = r"""
- name: Learn the node's RDMA adapters
  hpcml.cluster.rdma_facts:
"""

RETURN = r"""
ansible_facts:
  description: Facts under C(hpcml_rdma).
  returned: always
  type: dict
  contains:
    hpcml_rdma:
      description: C(present), C(reason) when absent, C(pci_count), C(device_count), C(devices) with their C(ports),
        C(active_ports), C(link_layers), C(ibv_devinfo) (whether ibv_devinfo answered).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hpcml.cluster.plugins.module_utils import pci, rdma


def main():
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/sys"}, "ibv_devinfo": {"type": "path"}},
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    devices = rdma.scan_devices(root)
    verbs = module.params["ibv_devinfo"] or module.get_bin_path("ibv_devinfo")
    answered = False
    if devices and verbs:
        rc, out, _err = module.run_command([verbs, "-v"])
        answered = rc == 0
        if answered:
            rdma.merge_ibv_devinfo(devices, rdma.parse_ibv_devinfo(out))
    facts = rdma.summarize(pci.scan(root), devices)
    facts["ibv_devinfo"] = answered
    module.exit_json(changed=False, ansible_facts={"hpcml_rdma": facts})


if __name__ == "__main__":
    main()
