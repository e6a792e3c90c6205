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
  - Where C(ibv_devinfo) is installed, adds each port's transport, active MTU and LIDs as the verbs library sees them;
    where only C(ibstat) is, adds the LIDs from it.
  - Output of either tool that cannot be read is reported in C(port_details_error), never taken for "nothing to add".
  - Changes nothing; supports check mode.
options:
  ibv_devinfo:
    description: Path of ibv_devinfo; found on PATH when not given.
    type: path
  ibstat:
    description: Path of ibstat, asked where ibv_devinfo is not installed; found on PATH when not given.
    type: path
extends_documentation_fragment:
  - hpcml.cluster.sysfs
author: hpcml maintainers (!UNKNOWN)
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
        C(active_ports), C(nvlink5_switch_ports) (NVSwitch management ports of an NVLink5 baseboard, found by
        C(SW_MNG) in their PCI VPD), C(link_layers), C(port_details) (the tool that added MTU and LIDs, or null),
        C(port_details_error) (why neither could).
      type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing, pci, rdma

# The tools that know each port's MTU and LIDs, best first, with their arguments and parsers.
TOOLS = (("ibv_devinfo", ["-v"], rdma.parse_ibv_devinfo), ("ibstat", [], rdma.parse_ibstat))


def port_details(module, devices):
    """Adds MTU and LIDs from the first tool installed: (the tool used, None) or (None, why none could)."""
    for name, args, parse in TOOLS:
        tool = module.params[name] or module.get_bin_path(name)
        if not tool or not os.access(tool, os.X_OK):
            continue
        rc, out, err = module.run_command([tool, *args])
        if rc != 0:
            return None, parsing.exited(name, rc, err, out)
        try:
            rdma.merge_port_details(devices, parse(out))
        except parsing.ParseError as error:
            return None, str(error)
        return name, None
    return None, "neither ibv_devinfo nor ibstat is installed"


def main():
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/sys"}, "ibv_devinfo": {"type": "path"},
                       "ibstat": {"type": "path"}},
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    devices = rdma.scan_devices(root)
    used, error = port_details(module, devices) if devices else (None, None)
    facts = rdma.summarize(pci.scan(root), devices)
    facts.update({"port_details": used, "port_details_error": error})
    module.exit_json(changed=False, ansible_facts={"hpcml_rdma": facts})


if __name__ == "__main__":
    main()
