# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: threshold_problems
short_description: What is wrong with acceptance thresholds, before anything is measured
description:
  - Returns one message per problem with the thresholds M(hpcml.cluster.node_acceptance) would judge by, each naming
    the key and what is valid; an empty list where there is none. A threshold that judges nothing lets a slow node
    pass on the fraction of its limit alone, so each is refused before the nodes are measured.
  - Problems are a SKU key not written C(<GPU model> x<GPU count>), an unknown key (a misspelt test name), a value
    that is not a positive finite number (0, a negative number, NaN, infinity, text), a C(message_bytes) that is not
    a whole number, and a C(min_fraction), the SKU's or the global one, outside (0, 1].
  - Given O(nodes), also every entry whose SKU none of those nodes has.
positional: _input
options:
  _input:
    description: The thresholds, SKU -> key -> number (M(hpcml.cluster.node_acceptance)'s C(thresholds)).
    type: raw
    required: true
  min_fraction:
    description: The global min_fraction.
    type: raw
    default: 0.8
  nodes:
    description: Each node's C(hpcml_gpu) facts by name (M(hpcml.cluster.gpu_facts)), for the SKUs they have.
    type: dict
  prefix:
    description: Put before C(thresholds) and C(min_fraction) in the messages, to name the variables that hold them.
    type: str
    default: ''
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the thresholds before anything is measured
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: >-
      {{ node_acceptance_thresholds | hpcml.cluster.threshold_problems(node_acceptance_min_fraction,
         prefix='node_acceptance_') }}
"""

RETURN = r"""
_value:
  description: One message per problem; empty where there is none.
  type: list
  elements: str
"""

from ansible_collections.hpcml.cluster.plugins.module_utils.acceptance import threshold_problems


class FilterModule:
    def filters(self):
        return {"threshold_problems": threshold_problems}
