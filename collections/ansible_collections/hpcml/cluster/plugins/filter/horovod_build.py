# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: horovod_build
short_description: Parse the output of C(horovodrun --check-build)
description:
  - Returns the Horovod version and the frameworks, controllers and tensor operations it was built with.
positional: _input
options:
  _input:
    description: The command's standard output.
    type: str
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Record what Horovod was built with
  ansible.builtin.set_fact:
    horovod_build: "{{ check_build.stdout | hpcml.cluster.horovod_build }}"
"""

RETURN = r"""
_value:
  description: C(version), and the enabled C(frameworks), C(controllers) and C(tensor_operations).
  type: dict
"""

from ansible_collections.hpcml.cluster.plugins.module_utils.horovod import parse_check_build


class FilterModule:
    def filters(self):
        return {"horovod_build": parse_check_build}
