# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: unsupported_os
short_description: Why a node's operating system is not one the project supports
description:
  - Given a node's facts and the table of supported operating systems (C(cluster_supported_os)), returns an empty
    string where the node's distribution is in the table with its major version or its full version (Ubuntu's
    releases), otherwise one sentence naming what the node runs and every distribution and version supported.
positional: _input
options:
  _input:
    description: The node's C(ansible_facts), with C(distribution), C(distribution_version) and C(distribution_major_version).
    type: dict
    required: true
  supported:
    description: Distribution -> the versions supported (C(cluster_supported_os)).
    type: dict
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the node's operating system is supported
  ansible.builtin.assert:
    that: _problem | length == 0
    fail_msg: "{{ inventory_hostname }} {{ _problem }}"
  vars:
    _problem: "{{ ansible_facts | hpcml.cluster.unsupported_os(cluster_supported_os) }}"
"""

RETURN = r"""
_value:
  description: Empty where the operating system is supported, otherwise why not.
  type: str
"""

from typing import Any


def unsupported_os(facts: dict[str, Any], supported: dict[str, list[str]]) -> str:
    distribution = facts.get("distribution")
    versions = [str(v) for v in supported.get(distribution) or []]
    if str(facts.get("distribution_major_version")) in versions or str(facts.get("distribution_version")) in versions:
        return ""
    table = "; ".join(f"{name} {'/'.join(str(v) for v in names)}" for name, names in supported.items())
    return f"runs {distribution} {facts.get('distribution_version')}; supported: {table}."


class FilterModule:
    def filters(self):
        return {"unsupported_os": unsupported_os}
