# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: validation_verdict
short_description: The node validation summary's verdicts, each with how many checks ran and how many were skipped
description:
  - Given the node validation summary without its verdicts (cluster checks, nodes, links) and what the inventory
    expects each node to have checked, returns the summary with C(counts) (total, ran, passed, failed, skipped over
    every check, node and link), C(status) and each node's C(verdict).
  - A node's verdict is C(fail) when one of its checks failed; C(incomplete) when, for a kind of hardware it is
    expected to have (gpu, rdma), none of the checks of that kind ran (each was skipped), with every skip's reason;
    otherwise C(pass). The summary's status is C(fail) when any check or link failed, else C(incomplete) when any node
    is, else C(pass).
  - A skip is not a pass; where the inventory expects nothing, a node whose hardware checks were all skipped still
    passes, and its counts say how little ran.
positional: _input, expected
options:
  _input:
    description: The summary (C(cluster), C(nodes) with each node's C(checks) and optional C(acceptance), C(links)).
    type: dict
    required: true
  expected:
    description: Each node's expected kinds of hardware (node_checks_expect), by node name; every node of the
      summary must have an entry.
    type: dict
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the summary
  ansible.builtin.set_fact:
    summary: "{{ checked | hpcml.cluster.validation_verdict({'gpu01': ['gpu', 'rdma']}) }}"
"""

RETURN = r"""
_value:
  description: The summary with C(status), C(counts) and each node's C(verdict) (status, reason, expected, counts).
  type: dict
"""

from collections.abc import Iterable
from typing import Any

from ansible.errors import AnsibleFilterError

# The validation play's checks (node_checks' tasks/10-node.yml, and acceptance_inputs from node_acceptance's
# 15-judge.yml) that look at each kind of hardware; every acceptance check is a GPU check too (nccl-tests, DCGM and
# the GPU counters run on GPUs only).
KIND_CHECKS = {"gpu": ("nvidia_smi", "peermem_loaded", "gpudirect_route", "gpu_nic_topology", "acceptance_inputs"),
               "rdma": ("ib_ports_active", "peermem_loaded", "gpudirect_route", "gpu_nic_topology")}
KIND_NAMES = {"gpu": "GPU", "rdma": "RDMA"}


def counts(checks: Iterable[dict[str, Any]]) -> dict[str, int]:
    statuses = [check["status"] for check in checks]
    passed, failed = statuses.count("pass"), statuses.count("fail")
    return {"total": len(statuses), "ran": passed + failed, "passed": passed, "failed": failed,
            "skipped": statuses.count("skip")}


def _skips(checks: dict[str, dict[str, Any]]) -> str:
    """Skipped checks grouped by their reason, which the GPUDirect checks share: 'a, b: why; c: why'."""
    by_reason: dict[str, list[str]] = {}
    for name, check in checks.items():
        by_reason.setdefault(check.get("reason") or "(no reason given)", []).append(name)
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())


def node_verdict(node: dict[str, Any], expected: list[str]) -> dict[str, Any]:
    acceptance = (node.get("acceptance") or {}).get("checks", {})
    checks = {**node["checks"], **acceptance}
    tally = counts(checks.values())
    problems = []
    failed = [name for name, check in checks.items() if check["status"] == "fail"]
    if failed:
        problems.append("failed: " + ", ".join(failed))
    for kind in expected:
        of_kind = {name: check for name, check in checks.items()
                   if name in KIND_CHECKS[kind] or (kind == "gpu" and name in acceptance)}
        if all(check["status"] == "skip" for check in of_kind.values()):
            problems.append(f"node_checks_expect has {kind}, but none of its {len(of_kind)} {KIND_NAMES[kind]} "
                            f"checks ran ({_skips(of_kind)})")
    status = "fail" if failed else ("incomplete" if problems else "pass")
    return {"status": status, "reason": "; ".join(problems) or None, "expected": list(expected), "counts": tally}


def validation_verdict(document: dict[str, Any], expected: dict[str, list[str]]) -> dict[str, Any]:
    nodes = {}
    for name, node in document["nodes"].items():
        if name not in expected:
            raise AnsibleFilterError(f"validation_verdict: no expected hardware given for node {name}")
        unknown = sorted(set(expected[name]) - set(KIND_CHECKS))
        if unknown:
            raise AnsibleFilterError(f"validation_verdict: node {name}: node_checks_expect has {', '.join(unknown)}; "
                                     f"valid: {', '.join(KIND_CHECKS)}")
        nodes[name] = {**node, "verdict": node_verdict(node, expected[name])}
    every = [*document["cluster"].values(), *document["links"]]
    for node in document["nodes"].values():
        every += [*node["checks"].values(), *(node.get("acceptance") or {}).get("checks", {}).values()]
    tally = counts(every)
    verdicts = [node["verdict"]["status"] for node in nodes.values()]
    status = "fail" if tally["failed"] or "fail" in verdicts else ("incomplete" if "incomplete" in verdicts else "pass")
    return {**document, "status": status, "counts": tally, "nodes": nodes}


class FilterModule:
    def filters(self):
        return {"validation_verdict": validation_verdict}
