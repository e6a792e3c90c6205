# -*- coding: utf-8 -*-
"""RDMA adapters from sysfs: PCI presence and, once a driver is bound, /sys/class/infiniband."""

from __future__ import annotations

import os
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing, pci

RDMA_VENDORS = (pci.MELLANOX_VENDOR,)
# On NVLink5 baseboards (HGX B200/B300) the host reaches the NVSwitches through ConnectX management ports, RDMA devices
# whose PCI VPD carries this keyword; NVIDIA's driver container takes them as the sign of an NVLink5 system, which needs
# the NVLink Subnet Manager beside Fabric Manager (NVIDIA/gpu-driver-container, ubuntu22.04/nvidia-driver,
# _assert_nvlink5_system, 2026-08).
NVSWITCH_MANAGEMENT_VPD = b"SW_MNG"
IBV_DEVINFO = "ibv_devinfo"
IBSTAT = "ibstat"


def _state(value):
    """'4: ACTIVE' -> 'ACTIVE'."""
    if not value:
        return None
    return value.split(":", 1)[-1].strip()


def _rate_gbps(value):
    """'200 Gb/sec (4X HDR)' -> 200.0; None for a rate that holds no finite number of 0 or more."""
    match = re.match(r"^\s*([0-9.]+)\s*Gb/sec", value or "")
    try:
        return parsing.measure(parsing.decimal(match.group(1), "the rate"), "the rate") if match else None
    except parsing.BadValue:
        return None


def _vpd_says_nvswitch_management(path):
    try:
        with open(path, "rb") as handle:
            return NVSWITCH_MANAGEMENT_VPD in handle.read()
    except OSError:
        return False


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
            "nvswitch_management": _vpd_says_nvswitch_management(os.path.join(device_link, "vpd")),
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
        reason = "no RDMA adapter found on the PCI bus (vendor {})".format(", ".join(RDMA_VENDORS))
    return {
        "present": bool(devices),
        "reason": reason,
        "pci_devices": [d["address"] for d in adapters],
        "pci_count": len(adapters),
        "devices": devices,
        "device_count": len(devices),
        "active_ports": len(active),
        "nvlink5_switch_ports": sum(1 for d in devices if d["nvswitch_management"]),
        "link_layers": sorted({p["link_layer"] for d in devices for p in d["ports"] if p["link_layer"]}),
    }


def _ibv_value(value):
    """'4: PORT_ACTIVE' -> 'PORT_ACTIVE', '4096 (5)' -> '4096'; other values as they are."""
    value = value.strip()
    match = re.match(r"^(\d+)\s+\(\d+\)$", value)
    if match:
        return match.group(1)
    return value.split(":", 1)[1].strip() if re.match(r"^\d+:\s", value) else value


def parse_ibv_devinfo(text: str) -> dict:
    """`ibv_devinfo [-v]` output -> {hca name: {fields..., "ports": {number: {fields...}}}}.
    Lines before the first hca_id (a shell prompt) and lines that are not `field: value` (-v's flag lists, GIDs) are
    skipped; output with no device, or a device without a port, raises ParseError."""
    devices = {}
    device = port = None
    for number, line in enumerate(parsing.bounded(IBV_DEVINFO, text).splitlines(), start=1):
        hca = re.match(r"^hca_id:\s*(\S+)", line)
        if hca:
            device = devices.setdefault(hca.group(1), {"ports": {}})
            port = None
            continue
        if device is None:
            continue
        port_match = re.match(r"^\s+port:\s*([0-9]+)", line)
        if port_match:
            port = device["ports"].setdefault(_port(port_match.group(1), number, IBV_DEVINFO, text), {})
            continue
        field = re.match(r"^\s+(\w+):\s*(.*)$", line)
        if field:
            (port if port is not None else device)[field.group(1)] = _ibv_value(field.group(2))
    _require_ports(IBV_DEVINFO, devices, "no hca_id line", text)
    return devices


# ibstat's labels for what ibv_devinfo also reports, under ibv_devinfo's names so that either tool's ports merge alike.
_IBSTAT_FIELDS = {"Base lid": "port_lid", "SM lid": "sm_lid", "Link layer": "link_layer", "State": "state",
                  "Physical state": "phys_state", "Rate": "rate", "CA type": "ca_type", "Firmware version": "fw_ver"}


def parse_ibstat(text: str) -> dict:
    """`ibstat` output -> {CA name: {fields..., "ports": {number: {fields...}}}}, with ibv_devinfo's field names where
    both tools report the same thing. Lines before the first CA (a shell prompt) are skipped; a line it does not know
    after that (ibstat's own "ibpanic:" when a device vanishes) raises ParseError, as does output without a CA."""
    devices = {}
    device = port = None
    for number, line in enumerate(parsing.bounded(IBSTAT, text).splitlines(), start=1):
        ca = re.match(r"^CA '([^']+)'\s*$", line)
        port_match = re.match(r"^\s+Port ([0-9]+):\s*$", line)
        field = re.match(r"^\s+([A-Za-z][A-Za-z ]*):\s*(.*?)\s*$", line)
        if ca:
            device = devices.setdefault(ca.group(1), {"ports": {}})
            port = None
        elif device is None or not line.strip():
            continue
        elif port_match:
            port = device["ports"].setdefault(_port(port_match.group(1), number, IBSTAT, text), {})
        elif field:
            key = _IBSTAT_FIELDS.get(field.group(1), field.group(1).lower().replace(" ", "_"))
            (port if port is not None else device)[key] = field.group(2)
        else:
            raise parsing.fail(IBSTAT, f"unexpected line {line.strip()!r} after CA {list(devices)[-1]!r}", text)
    _require_ports(IBSTAT, devices, "no CA line", text)
    return devices


def _port(value: str, number: int, tool: str, text: str) -> int:
    """A port number; a ParseError naming the line for one no tool prints."""
    try:
        return parsing.count(value, "the port number")
    except parsing.BadValue as error:
        raise parsing.fail(tool, f"line {number}: {error}", text) from None


def _require_ports(tool: str, devices: dict, nothing: str, text: str) -> None:
    """Output that names no device, or a device without a port, is output cut short or not this tool's."""
    if not devices:
        raise parsing.fail(tool, nothing, text)
    portless = [name for name, device in devices.items() if not device["ports"]]
    if portless:
        raise parsing.fail(tool, "no port listed for {}".format(", ".join(portless)), text)


def merge_port_details(devices: list, parsed: dict) -> list:
    """Adds what only the verbs tools know (transport, MTU, LIDs) to each sysfs device's ports, from
    parse_ibv_devinfo or parse_ibstat."""
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
