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

    # For the modules that also ask nvidia-smi (hpcml.cluster.sysfs.nvidia_smi).
    NVIDIA_SMI = r"""
options:
  nvidia_smi:
    description: Path of nvidia-smi; found on PATH when not given.
    type: path
"""
