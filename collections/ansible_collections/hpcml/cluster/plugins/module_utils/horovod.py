# -*- coding: utf-8 -*-
"""Parsing `horovodrun --check-build`: what a Horovod installation was compiled with."""

from __future__ import annotations

import re

_SECTIONS = {
    "Available Frameworks": "frameworks",
    "Available Controllers": "controllers",
    "Available Tensor Operations": "tensor_operations",
}


def parse_check_build(text):
    """{'version': '0.28.1', 'frameworks': [...], 'controllers': [...], 'tensor_operations': [...]}, enabled ones only."""
    parsed = {"version": None, "frameworks": [], "controllers": [], "tensor_operations": []}
    section = None
    for line in text.splitlines():
        version = re.match(r"^Horovod v(\S+?):?$", line.strip())
        if version:
            parsed["version"] = version.group(1)
            continue
        heading = line.strip().rstrip(":")
        if heading in _SECTIONS:
            section = _SECTIONS[heading]
            continue
        item = re.match(r"^\s*\[(X| )\]\s*(\S.*?)\s*$", line)
        if item and section and item.group(1) == "X":
            parsed[section].append(item.group(2))
    return parsed
