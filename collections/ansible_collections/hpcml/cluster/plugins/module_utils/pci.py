# -*- coding: utf-8 -*-
"""Reading PCI devices from sysfs, so hardware is found even before any driver loads."""

from __future__ import annotations

import os

NVIDIA_VENDOR = "0x10de"
MELLANOX_VENDOR = "0x15b3"
# PCI class codes (class, subclass): display controllers, bridges, network and InfiniBand.
CLASS_VGA = "0x0300"
CLASS_3D = "0x0302"
CLASS_BRIDGE_OTHER = "0x0680"
CLASS_ETHERNET = "0x0200"
CLASS_INFINIBAND = "0x0207"


def read_value(path):
    """A sysfs attribute's value, or None where the kernel does not provide it."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def entries(path):
    """Sorted names in a sysfs folder; none when the folder does not exist (no such hardware or driver)."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def scan(sysfs_root="/sys"):
    """Every PCI function under sysfs_root as {address, vendor, device, class, driver}."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    devices = []
    for address in entries(base):
        path = os.path.join(base, address)
        driver_link = os.path.join(path, "driver")
        driver = os.path.basename(os.readlink(driver_link)) if os.path.islink(driver_link) else None
        devices.append({
            "address": address,
            "vendor": read_value(os.path.join(path, "vendor")),
            "device": read_value(os.path.join(path, "device")),
            "class": (read_value(os.path.join(path, "class")) or "")[:6],
            "driver": driver,
            "numa_node": read_value(os.path.join(path, "numa_node")),
        })
    return devices


def select(devices, vendor, classes):
    return [d for d in devices if d["vendor"] == vendor and d["class"] in classes]
