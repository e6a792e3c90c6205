#!/usr/bin/python
# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_acceptance
short_description: Judge a node's acceptance checks from the outputs the role recorded
description:
  - Reads what the validation role ran on a node (nccl-tests within the node and to its peers, C(dcgmi diag),
    C(nvidia-smi -q -x), the kernel log, C(nvidia-smi nvlink -e)) together with the node's facts, and returns each
    check's verdict, pass, fail or skip, with its reason, the measured figure, the node's physical limit, the fraction
    of it reached and the SKU's threshold.
  - Bus bandwidth is judged against both the SKU's threshold (table keyed by GPU model and count, e.g. C(H100 x8))
    and O(min_fraction) of the node's own physical limit, computed from its facts (NVLink generation and links, PCIe
    generation and width, NIC rate and count).
  - GPU health counters fail on uncorrectable ECC errors, pending page retirement or row remap, a row remapping
    failure, active hardware, thermal or power-brake slowdowns, a degraded PCIe link, fatal Xid events and NVLink
    error counts. A counter the driver does not report makes its check a skip, never a pass.
  - The module never fails because a check failed (the role decides what to do); it fails on malformed arguments,
    such as a check with neither output nor a reason in O(skip), or a threshold that would judge nothing (see
    O(thresholds)).
  - Runs nothing and changes nothing; supports check mode.
options:
  node:
    description: This node's name, the C(a) end of each link it reports.
    type: str
  nccl:
    description: The nccl-tests runs, each with its output.
    type: list
    elements: dict
    default: []
    suboptions:
      test:
        description: The test, C(all_reduce_perf) or C(all_reduce) alike.
        type: str
        required: true
      scope:
        description: C(node) for a run within this node, C(pair) for a run between this node and O(nccl[].peer).
        type: str
        required: true
        choices: [node, pair]
      peer:
        description: The other node of a C(pair) run.
        type: str
      peer_facts:
        description: The peer's C(gpu), C(rdma) and C(gpudirect) facts, for its limits; without them a link is judged
          on this node's limits alone, and says so.
        type: dict
      output:
        description: What the test printed.
        type: str
        required: true
      rc:
        description: Its exit status.
        type: int
  dcgm:
    description: The C(dcgmi diag) run, or null where none ran.
    type: dict
    suboptions:
      level:
        description: Its C(-r) level.
        type: int
        required: true
      output:
        description: What it printed (text or C(-j) JSON).
        type: str
        required: true
      rc:
        description: Its exit status.
        type: int
  smi_xml:
    description: The output of C(nvidia-smi -q -x), for the GPU health counters and PCIe links.
    type: str
  kernel_log:
    description: The kernel log (C(dmesg) or C(journalctl -k)), for Xid events.
    type: str
  nvlink_errors:
    description: The output of C(nvidia-smi nvlink -e).
    type: str
  gpu:
    description: The node's C(hpcml_gpu) facts (M(hpcml.cluster.gpu_facts)).
    type: dict
    required: true
  rdma:
    description: The node's C(hpcml_rdma) facts (M(hpcml.cluster.rdma_facts)).
    type: dict
    default: {}
  gpudirect:
    description: The node's C(hpcml_gpudirect) facts (M(hpcml.cluster.gpudirect_facts)).
    type: dict
    default: {}
  thresholds:
    description:
      - >-
        Per-SKU thresholds, e.g. C({"H100 x8": {"message_bytes": 17179869184, "all_reduce_busbw_gbs": 460,
        "per_nic_gbps": 380, "per_nic_rate_gbps": 400}}); C(<test>_busbw_gbs) for each collective within the node
        (C(all_reduce), C(all_gather), C(reduce_scatter), C(alltoall)), C(per_nic_gbps) for links (applied to NICs of
        C(per_nic_rate_gbps) or faster, with GPUDirect RDMA at both ends), C(min_fraction) in place of O(min_fraction)
        for that SKU.
      - >-
        They go over the default table, Azure's node health check figures for 8 x H100, H200 and A100, key by key:
        an entry that sets C(all_gather_busbw_gbs) keeps the default C(all_reduce_busbw_gbs).
      - >-
        Refused, naming the key and what is valid: a SKU key not written C(<GPU model> x<GPU count>) as the result's
        C(sku) gives it, an unknown key, a value that is not a positive finite number (a numeric string such as
        C("460") is read as the number, as Ansible reads its own float options), a C(message_bytes) that is not a
        whole number, a C(min_fraction) outside (0, 1].
    type: dict
  min_fraction:
    description: The least fraction of the physical limit a measured bus bandwidth must reach, where the SKU's
      thresholds do not set their own; in (0, 1].
    type: float
    default: 0.8
  skip:
    description: Check name (or C(smi_xml) for all four counter checks) -> why the role did not run it.
    type: dict
    default: {}
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the node
  hpcml.cluster.node_acceptance:
    node: "{{ inventory_hostname }}"
    nccl:
      - test: all_reduce_perf
        scope: node
        output: "{{ _all_reduce.stdout }}"
        rc: "{{ _all_reduce.rc }}"
    smi_xml: "{{ _smi.stdout }}"
    kernel_log: "{{ _dmesg.stdout }}"
    gpu: "{{ ansible_facts.hpcml_gpu }}"
    rdma: "{{ ansible_facts.hpcml_rdma }}"
    gpudirect: "{{ ansible_facts.hpcml_gpudirect }}"
    skip:
      nccl_all_gather: not asked for
      nccl_reduce_scatter: not asked for
      nccl_alltoall: not asked for
      dcgm_diag: DCGM is not installed
      nvlink_errors: no NVLink on this node
  register: _acceptance
"""

RETURN = r"""
acceptance:
  description: The node's verdict.
  returned: always
  type: dict
  contains:
    status:
      description: C(fail) when any check or link failed, else C(pass).
      type: str
    sku:
      description: GPU model and count (C(H100 x8)), the threshold table's key; null with C(sku_reason) where unknown.
      type: str
    sku_reason:
      description: Why C(sku) is null.
      type: str
    limits:
      description: The node's physical limits, C(intra_node_busbw_gbs) and C(intra_node_basis), C(nvlink), C(pcie),
        C(per_nic_gbps), C(nic_count), C(inter_node_busbw_gbs) and C(inter_node_basis), C(gpudirect), and C(reasons)
        (why a limit is unknown).
      type: dict
    thresholds:
      description: The SKU's thresholds (the default table's entry with O(thresholds) over it), null where neither has
        one.
      type: dict
    min_fraction:
      description: The fraction of the limit a bandwidth had to reach.
      type: float
    min_fraction_source:
      description: Where it came from, C(default) or C(inventory) (the SKU's entry in the default table or in
        O(thresholds)) or C(global) (O(min_fraction)).
      type: str
    checks:
      description: Check name -> C(status), C(reason), C(measured), C(unit), C(limit), C(fraction), C(threshold),
        C(threshold_key) (the SKU entry and key it was read from, C(H100 x8.all_reduce_busbw_gbs)),
        C(threshold_source) (C(default) for the default table, C(inventory) for O(thresholds), C(none) where no
        threshold judged the check) and, for counters, C(detail). Checks are C(nccl_all_reduce), C(nccl_all_gather),
        C(nccl_reduce_scatter), C(nccl_alltoall), C(dcgm_diag), C(gpu_ecc), C(gpu_memory_repair), C(gpu_clock_events),
        C(gpu_pcie_link), C(gpu_xid) and C(nvlink_errors).
      type: dict
    links:
      description: One per C(pair) run, C(a), C(b), C(test), C(status), C(busbw_gbs), C(limit_gbs), C(fraction),
        C(threshold_gbs), C(threshold_key), C(threshold_source), C(reason).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcml.cluster.plugins.module_utils import acceptance, gpu, gpu_errors, limits, parsing
from ansible_collections.hpcml.cluster.plugins.module_utils.dcgm import parse_dcgmi_diag
from ansible_collections.hpcml.cluster.plugins.module_utils.nccl import parse_nccl_tests


def read(parse, text):
    """A parser's result, or the exception it raised: an output it cannot read fails its check, not the module."""
    try:
        return parse(text)
    except (parsing.ParseError, ValueError) as error:
        return error


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str"},
            "nccl": {"type": "list", "elements": "dict", "default": [], "options": {
                "test": {"type": "str", "required": True},
                "scope": {"type": "str", "required": True, "choices": ["node", "pair"]},
                "peer": {"type": "str"},
                "peer_facts": {"type": "dict"},
                "output": {"type": "str", "required": True},
                "rc": {"type": "int"},
            }},
            "dcgm": {"type": "dict", "options": {
                "level": {"type": "int", "required": True},
                "output": {"type": "str", "required": True},
                "rc": {"type": "int"},
            }},
            "smi_xml": {"type": "str"},
            "kernel_log": {"type": "str"},
            "nvlink_errors": {"type": "str"},
            "gpu": {"type": "dict", "required": True},
            "rdma": {"type": "dict", "default": {}},
            "gpudirect": {"type": "dict", "default": {}},
            "thresholds": {"type": "dict"},
            "min_fraction": {"type": "float", "default": acceptance.MIN_FRACTION},
            "skip": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    nccl = [dict(entry, parsed=read(parse_nccl_tests, entry["output"])) for entry in p["nccl"]]
    peers = {entry["peer"]: limits.limits(entry["peer_facts"].get("gpu"), entry["peer_facts"].get("rdma"),
                                          entry["peer_facts"].get("gpudirect"), None)
             for entry in p["nccl"] if entry["scope"] == "pair" and entry.get("peer_facts")}
    dcgm = dict(p["dcgm"], parsed=read(parse_dcgmi_diag, p["dcgm"]["output"])) if p["dcgm"] else None
    optional = {name: read(parse, p[param]) if p[param] is not None else None
                for name, param, parse in (("counters", "smi_xml", gpu.gpu_counters),
                                           ("xid", "kernel_log", gpu_errors.parse_xid),
                                           ("nvlink", "nvlink_errors", gpu_errors.parse_nvlink_errors))}
    try:
        verdict = acceptance.judge(p["gpu"], p["rdma"], p["gpudirect"], nccl=nccl, dcgm=dcgm,
                                   thresholds=p["thresholds"], min_fraction=p["min_fraction"], skip=p["skip"],
                                   node=p["node"], peers=peers, **optional)
    except ValueError as error:
        module.fail_json(msg=f"node_acceptance: {error}")
    module.exit_json(changed=False, acceptance=verdict)


if __name__ == "__main__":
    main()
