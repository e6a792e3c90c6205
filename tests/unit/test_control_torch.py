"""The control host's torch, which its tests of the pytorch-ddp path run on, is the nodes' torch."""

from __future__ import annotations

import re
from pathlib import Path

import torch
import yaml

PROJECT = Path(__file__).resolve().parents[2]


def test_the_control_hosts_torch_is_python_envs_cpu_build():
    pinned = re.search(r"^TORCH_VERSION \?= (\S+)$", (PROJECT / "Makefile").read_text(), re.MULTILINE).group(1)
    defaults = yaml.safe_load((PROJECT / "roles" / "python_env" / "defaults" / "main.yml").read_text())
    assert pinned == defaults["python_env_torch_version"]
    assert torch.__version__ == f"{pinned}+cpu"
