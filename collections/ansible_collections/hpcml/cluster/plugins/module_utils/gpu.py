# -*- coding: utf-8 -*-
"""Parsers for NVIDIA GPU state: PCI scan results, `nvidia-smi -q -x` and `nvidia-smi topo -m`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.hpcml.cluster.plugins.module_utils import pci


def _text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A") else value


def _mib(value):
    """'81559 MiB' -> 81559; None when absent."""
    if not value:
        return None
    match = re.match(r"^\s*(\d+)\s*MiB", value)
    return int(match.group(1)) if match else None


def parse_smi_xml(text):
    """The driver, CUDA and per-GPU facts from `nvidia-smi -q -x`."""
    root = ET.fromstring(text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append({
            "index": index,
            "pci_bus_id": gpu.get("id"),
            "name": _text(gpu, "product_name"),
            "architecture": _text(gpu, "product_architecture"),
            "uuid": _text(gpu, "uuid"),
            "serial": _text(gpu, "serial"),
            "vbios_version": _text(gpu, "vbios_version"),
            "memory_total_mib": _mib(_text(gpu, "fb_memory_usage/total")),
            "persistence_mode": _text(gpu, "persistence_mode"),
            "mig_mode": _text(gpu, "mig_mode/current_mig"),
            "compute_mode": _text(gpu, "compute_mode"),
            "pcie_generation": _text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
            "pcie_width": _text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
            "power_limit": _text(gpu, "gpu_power_readings/current_power_limit") or _text(gpu, "power_readings/power_limit"),
        })
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "driver_count": len(gpus),
        "gpus": gpus,
    }


def parse_topo_matrix(text):
    """`nvidia-smi topo -m`: the link between every pair of GPUs/NICs and each GPU's CPU and NUMA affinity."""
    lines = [line.rstrip() for line in text.splitlines()]
    header_index = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_index is None:
        return {"devices": [], "links": {}, "affinity": {}, "nvlink": False}
    # Header cells are split on runs of 2+ spaces or tabs: "CPU Affinity" holds a single space.
    header = [cell for cell in re.split(r"\t+|\s{2,}", lines[header_index].strip()) if cell]
    devices = [cell for cell in header if re.match(r"^(GPU|NIC|mlx)\w*$", cell)]
    links = {}
    affinity = {}
    for line in lines[header_index + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = [cell for cell in re.split(r"\t+|\s{2,}", line.strip()) if cell != ""]
        name, values = cells[0], cells[1:]
        if name not in devices:
            continue
        links[name] = dict(zip(devices, values[:len(devices)]))
        extra = dict(zip(header[len(devices):], values[len(devices):]))
        if name.startswith("GPU"):
            affinity[name] = {
                "cpus": extra.get("CPU Affinity"),
                "numa": extra.get("NUMA Affinity"),
            }
    nvlink = any(link.startswith("NV") for row in links.values() for link in row.values())
    return {"devices": devices, "links": links, "affinity": affinity, "nvlink": nvlink}


def from_pci(devices):
    """GPUs and NVSwitches visible on the PCI bus, whatever driver is (not) loaded."""
    gpus = pci.select(devices, pci.NVIDIA_VENDOR, (pci.CLASS_VGA, pci.CLASS_3D))
    nvswitches = pci.select(devices, pci.NVIDIA_VENDOR, (pci.CLASS_BRIDGE_OTHER,))
    return {
        "pci_devices": [d["address"] for d in gpus],
        "pci_count": len(gpus),
        "nvswitch_count": len(nvswitches),
        "kernel_drivers": sorted({d["driver"] for d in gpus if d["driver"]}),
    }
