#!/usr/bin/python
# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_acceptance
short_description: TEMPORARY stand-in for the node acceptance judgement (the judge's module replaces this file)
description:
  - Keeps the interface the node_validation role calls. Every check named in O(skip) is C(skip) with its reason;
    every input given to it is C(fail), since this stand-in judges nothing. Changes nothing; supports check mode.
options:
  nccl: {description: nccl-tests runs, each test, scope, peer, output and rc., type: list, elements: dict, default: []}
  dcgm: {description: dcgmi diag's level, output and rc., type: dict}
  smi_xml: {description: nvidia-smi -q -x output., type: str}
  kernel_log: {description: The kernel log's Xid lines., type: str}
  nvlink_errors: {description: nvidia-smi nvlink -e output., type: str}
  gpu: {description: ansible_facts.hpcml_gpu., type: dict, required: true}
  rdma: {description: ansible_facts.hpcml_rdma., type: dict, required: true}
  gpudirect: {description: ansible_facts.hpcml_gpudirect., type: dict, required: true}
  thresholds: {description: Thresholds per check., type: dict, default: {}}
  min_fraction: {description: Share of the hardware limit a measurement must reach., type: float, default: 0.8}
  skip: {description: Inputs not measured, with why., type: dict, default: {}}
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the node
  hpcml.cluster.node_acceptance:
    gpu: "{{ ansible_facts.hpcml_gpu }}"
    rdma: "{{ ansible_facts.hpcml_rdma }}"
    gpudirect: "{{ ansible_facts.hpcml_gpudirect }}"
    skip: {dcgm: no GPU}
"""

RETURN = r"""
acceptance:
  description: C(sku), C(limits), C(checks) (name -> status, reason, ...), C(links).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

INPUTS = ("nccl", "dcgm", "smi_xml", "kernel_log", "nvlink_errors")


def main():
    module = AnsibleModule(argument_spec={
        "nccl": {"type": "list", "elements": "dict", "default": []}, "dcgm": {"type": "dict"},
        "smi_xml": {"type": "str"}, "kernel_log": {"type": "str"}, "nvlink_errors": {"type": "str"},
        "gpu": {"type": "dict", "required": True}, "rdma": {"type": "dict", "required": True},
        "gpudirect": {"type": "dict", "required": True}, "thresholds": {"type": "dict", "default": {}},
        "min_fraction": {"type": "float", "default": 0.8}, "skip": {"type": "dict", "default": {}},
    }, supports_check_mode=True)
    checks = {name: {"status": "skip", "reason": reason} for name, reason in module.params["skip"].items()}
    for name in INPUTS:
        if module.params[name] and name not in checks:
            checks[name] = {"status": "fail", "reason": "the stand-in module judges nothing"}
    module.exit_json(changed=False, acceptance={"sku": None, "limits": {}, "checks": checks, "links": []})


if __name__ == "__main__":
    main()
