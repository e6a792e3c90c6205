# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations


class ModuleDocFragment:
    # The option every hardware facts module shares.
    DOCUMENTATION = r"""
options:
  sysfs_root:
    description: Root of sysfs; tests point it at a recorded tree.
    type: path
    default: /sys
"""
