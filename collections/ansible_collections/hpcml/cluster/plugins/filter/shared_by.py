# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: shared_by
short_description: Groups of names that share one value
description:
  - Given a mapping of names to values (inventory hosts to their machine-id, say), returns every group of two or
    more names whose values are equal, each group sorted, the groups in order of their first name.
  - A missing or empty value is a value too, so hosts whose fact could not be read are never taken as distinct.
positional: _input
options:
  _input:
    description: Names and their values.
    type: dict
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Refuse two inventory names for one machine
  ansible.builtin.assert:
    that: machines | hpcml.cluster.shared_by | length == 0
  vars:
    machines: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['ansible_machine_id']))) }}"
"""

RETURN = r"""
_value:
  description: Lists of names, one list per value that more than one name has.
  type: list
  elements: list
"""

from typing import Any


def shared_by(values: dict[str, Any]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for name, value in values.items():
        groups.setdefault(repr(value or ""), []).append(name)
    return sorted(sorted(names) for names in groups.values() if len(names) > 1)


class FilterModule:
    def filters(self):
        return {"shared_by": shared_by}
