# -*- coding: utf-8 -*-
"""Parsers for NVIDIA GPU state: PCI scan results, `nvidia-smi -q -x` and `nvidia-smi topo -m`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing, pci

SMI_XML = "nvidia-smi -q -x"
SMI_TOPO = "nvidia-smi topo -m"
# Columns of `topo -m` that follow the device columns.
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# Link types: self, NVLink bonds, then PCIe paths from nearest to farthest (SOC is SYS before driver 384).
LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")


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


def _minor_number(gpu: ET.Element) -> int | None:
    """The N of /dev/nvidiaN; None where the driver has no device file (Windows prints N/A)."""
    value = _text(gpu, "minor_number")
    return int(value) if value is not None and value.isdigit() else None


def parse_smi_xml(text: str) -> dict:
    """The driver, CUDA and per-GPU facts from `nvidia-smi -q -x`."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise parsing.fail(SMI_XML, f"not XML ({error})", text) from None
    if root.tag != "nvidia_smi_log":
        raise parsing.fail(SMI_XML, "no <nvidia_smi_log> element", text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append({
            "index": index,
            "minor_number": _minor_number(gpu),
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
    attached = _text(root, "attached_gpus")
    if attached is not None and int(attached) != len(gpus):
        raise parsing.fail(SMI_XML, f"<attached_gpus> says {attached} but {len(gpus)} <gpu> elements follow", text)
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "driver_count": len(gpus),
        "gpus": gpus,
    }


def _cells(line: str) -> list[str]:
    """A matrix line's cells. nvidia-smi separates them with tabs and leaves a cell empty where it knows nothing;
    output pasted through a terminal has runs of spaces instead, and its empty cells cannot be told apart."""
    if "\t" in line:
        return [cell.strip() for cell in line.rstrip("\n").split("\t")]
    return re.split(r"\s{2,}", line.strip())


def _header(lines: list[str], text: str) -> tuple[int, list[str], list[str]]:
    """Where the header is, the devices it names (GPU0.., NIC0.. or RDMA device names) and the columns after them."""
    for number, line in enumerate(lines):
        cells = _cells(line)
        if cells and cells[0] == "":
            cells = cells[1:]  # the empty corner above the row names
        if cells and cells[0] == "GPU0":
            split = next((i for i, cell in enumerate(cells) if cell in AFFINITY_COLUMNS), len(cells))
            return number, cells[:split], [cell for cell in cells[split:] if cell]
    raise parsing.fail(SMI_TOPO, "no header row starting with GPU0", text)


def _reported(value: str | None) -> str | None:
    """An affinity cell's value; None for an empty cell or N/A."""
    return None if value in (None, "", "N/A") else value


def _affinity(columns: list[str], cells: list[str]) -> dict:
    """CPU and NUMA affinity of one GPU row. Drivers that add "GPU NUMA ID" print an extra tab before it, so all
    columns but the last are read from the left and the last one from the right."""
    named = dict(zip(columns[:-1], cells))
    if columns and len(cells) >= len(columns):
        named[columns[-1]] = cells[-1]
    return {"cpus": _reported(named.get("CPU Affinity")), "numa": _reported(named.get("NUMA Affinity"))}


def _nic_legend(lines: list[str]) -> dict[str, str]:
    """'NIC Legend:' entries, e.g. {'NIC0': 'mlx5_0'}."""
    legend = {}
    start = next((i for i, line in enumerate(lines) if line.strip() == "NIC Legend:"), None)
    for line in lines[start + 1:] if start is not None else []:
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            legend[match.group(1)] = match.group(2)
        elif line.strip():
            break
    return legend


def _nic_names(devices: list[str], legend: dict[str, str], text: str) -> dict[str, str]:
    """Each NIC column's RDMA device: from the NIC Legend (drivers >= 510) or the column itself (older drivers)."""
    names = {}
    for device in devices:
        if device.startswith("GPU"):
            continue
        if re.match(r"^NIC\d+$", device) and device not in legend:
            raise parsing.fail(SMI_TOPO, f"column {device} has no entry in a NIC Legend", text)
        names[device] = legend.get(device, device)
    return names


def parse_topo_matrix(text: str) -> dict:
    """`nvidia-smi topo -m`: the link between every pair of GPUs/NICs, each GPU's CPU and NUMA affinity and each NIC
    column's RDMA device. Raises ParseError, naming the output, on anything it cannot read."""
    lines = parsing.strip_ansi(text).splitlines()
    number, devices, columns = _header(lines, text)
    links, affinity = {}, {}
    for line in lines[number + 1:]:
        cells = _cells(line)
        if not line.strip() or cells[0] == "Legend:":
            break
        name, values = cells[0], cells[1:]
        if name not in devices:
            raise parsing.fail(SMI_TOPO, f"row {name} is not a column of the header", text)
        row = values[:len(devices)]
        if len(row) < len(devices) or not all(LINK.match(value) for value in row):
            raise parsing.fail(SMI_TOPO, f"row {name} does not hold a link type for each of {len(devices)} devices",
                               text)
        links[name] = dict(zip(devices, row))
        if name.startswith("GPU"):
            affinity[name] = _affinity(columns, values[len(devices):])
    missing = [device for device in devices if device not in links]
    if missing:
        raise parsing.fail(SMI_TOPO, "no row for {}".format(", ".join(missing)), text)
    nvlink = any(link.startswith("NV") for row in links.values() for link in row.values())
    return {"devices": devices, "links": links, "affinity": affinity, "nvlink": nvlink,
            "nics": _nic_names(devices, _nic_legend(lines), text)}


def read_topology(run_command, smi: str) -> tuple[dict | None, str | None]:
    """Runs and parses `nvidia-smi topo -m` with run_command (AnsibleModule's): (topology, None), or (None, why not)."""
    rc, out, err = run_command([smi, "topo", "-m"])
    if rc != 0:
        return None, parsing.exited(SMI_TOPO, rc, err, out)
    try:
        return parse_topo_matrix(out), None
    except parsing.ParseError as error:
        return None, str(error)


def from_pci(devices):
    """GPUs and NVSwitches visible on the PCI bus, whatever driver is (not) loaded."""
    gpus = pci.select(devices, pci.NVIDIA_VENDOR, (pci.CLASS_VGA, pci.CLASS_3D))
    nvswitches = pci.select(devices, pci.NVIDIA_VENDOR, (pci.CLASS_BRIDGE_OTHER,))
    return {
        "pci_devices": [d["address"] for d in gpus],
        "pci_count": len(gpus),
        # Each GPU's PCI device ID (0x2330): its generation is known from it before any driver is installed.
        "pci_device_ids": [d["device"] for d in gpus],
        "nvswitch_count": len(nvswitches),
        "kernel_drivers": sorted({d["driver"] for d in gpus if d["driver"]}),
    }
