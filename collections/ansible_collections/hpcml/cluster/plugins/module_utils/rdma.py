# -*- coding: utf-8 -*-
"""RDMA adapters from sysfs: PCI presence and, once a driver is bound, /sys/class/infiniband."""

from __future__ import annotations

import os
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import pci

RDMA_VENDORS = (pci.MELLANOX_VENDOR,)


def _state(value):
    """'4: ACTIVE' -> 'ACTIVE'."""
    if not value:
        return None
    return value.split(":", 1)[-1].strip()


def _rate_gbps(value):
    """'200 Gb/sec (4X HDR)' -> 200.0."""
    match = re.match(r"^\s*([\d.]+)\s*Gb/sec", value or "")
    return float(match.group(1)) if match else None


def scan_devices(sysfs_root="/sys"):
    base = os.path.join(sysfs_root, "class", "infiniband")
    devices = []
    for name in pci.entries(base):
        path = os.path.join(base, name)
        ports = []
        ports_dir = os.path.join(path, "ports")
        for port in sorted(pci.entries(ports_dir), key=int):
            port_path = os.path.join(ports_dir, port)
            rate = pci.read_value(os.path.join(port_path, "rate"))
            ports.append({
                "port": int(port),
                "state": _state(pci.read_value(os.path.join(port_path, "state"))),
                "phys_state": _state(pci.read_value(os.path.join(port_path, "phys_state"))),
                "link_layer": pci.read_value(os.path.join(port_path, "link_layer")),
                "rate": rate,
                "rate_gbps": _rate_gbps(rate),
            })
        net_dir = os.path.join(path, "device", "net")
        device_link = os.path.join(path, "device")
        devices.append({
            "name": name,
            "hca_type": pci.read_value(os.path.join(path, "hca_type")),
            "fw_ver": pci.read_value(os.path.join(path, "fw_ver")),
            "node_guid": pci.read_value(os.path.join(path, "node_guid")),
            "board_id": pci.read_value(os.path.join(path, "board_id")),
            "pci_address": os.path.basename(os.path.realpath(device_link)) if os.path.exists(device_link) else None,
            "netdevs": pci.entries(net_dir),
            "ports": ports,
        })
    return devices


def summarize(pci_devices, devices):
    adapters = [d for d in pci_devices if d["vendor"] in RDMA_VENDORS
                and d["class"] in (pci.CLASS_ETHERNET, pci.CLASS_INFINIBAND)]
    active = [p for d in devices for p in d["ports"] if p["state"] == "ACTIVE"]
    if devices:
        reason = None
    elif adapters:
        reason = "RDMA adapters on the PCI bus but no RDMA driver bound (install OFED or rdma-core)"
    else:
        reason = "no RDMA adapter found on the PCI bus (vendor %s)" % ", ".join(RDMA_VENDORS)
    return {
        "present": bool(devices),
        "reason": reason,
        "pci_devices": [d["address"] for d in adapters],
        "pci_count": len(adapters),
        "devices": devices,
        "device_count": len(devices),
        "active_ports": len(active),
        "link_layers": sorted({p["link_layer"] for d in devices for p in d["ports"] if p["link_layer"]}),
    }


def _ibv_value(value):
    """'4: PORT_ACTIVE' -> 'PORT_ACTIVE', '4096 (5)' -> '4096'; other values as they are."""
    value = value.strip()
    match = re.match(r"^(\d+)\s+\(\d+\)$", value)
    if match:
        return match.group(1)
    return value.split(":", 1)[1].strip() if re.match(r"^\d+:\s", value) else value


def parse_ibv_devinfo(text):
    """`ibv_devinfo` output -> {hca name: {fields..., "ports": {number: {fields...}}}}."""
    devices = {}
    device = port = None
    for line in text.splitlines():
        hca = re.match(r"^hca_id:\s*(\S+)", line)
        if hca:
            device = devices.setdefault(hca.group(1), {"ports": {}})
            port = None
            continue
        if device is None:
            continue
        port_match = re.match(r"^\s+port:\s*(\d+)", line)
        if port_match:
            port = device["ports"].setdefault(int(port_match.group(1)), {})
            continue
        field = re.match(r"^\s+(\w+):\s*(.*)$", line)
        if field:
            (port if port is not None else device)[field.group(1)] = _ibv_value(field.group(2))
    return devices


def merge_ibv_devinfo(devices, parsed):
    """Adds what only the verbs library knows (transport, MTU, LIDs) to each sysfs device's ports."""
    for device in devices:
        info = parsed.get(device["name"])
        if not info:
            continue
        device["transport"] = info.get("transport")
        device["vendor_part_id"] = info.get("vendor_part_id")
        for port in device["ports"]:
            verbs = info["ports"].get(port["port"], {})
            port["active_mtu"] = verbs.get("active_mtu")
            port["lid"] = verbs.get("port_lid")
            port["sm_lid"] = verbs.get("sm_lid")
    return devices
