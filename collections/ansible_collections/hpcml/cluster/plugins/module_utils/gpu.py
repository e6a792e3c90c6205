# -*- coding: utf-8 -*-
"""Parsers for NVIDIA GPU state: PCI scan results, `nvidia-smi -q -x` and `nvidia-smi topo -m`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing, pci

SMI_XML = "nvidia-smi -q -x"
SMI_TOPO = "nvidia-smi topo -m"
# Columns of `topo -m` that follow the device columns, in the order drivers print them.
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# Link types: self, NVLink bonds, then PCIe paths from nearest to farthest (SOC is SYS before driver 384).
# ASCII digits, at most 3: no GPU has more NVLinks than that writes ('NV٣' or a 5000-digit bond is no link).
_LINK = r"X|NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS|SOC"
LINK = re.compile(rf"^({_LINK})$")
# Link types with no gap between them: a terminal that wraps a long row swallows the tab at its right edge.
GLUED_LINKS = re.compile(rf"^(?:{_LINK})+$")
GLUED_DEVICES = re.compile(r"^(?:(?:GPU|NIC)[0-9]+){2,}$")
# GitHub drops the ESC byte of the header's underline, leaving "[4m" and "[0m" in pasted output.
_BARE_SGR = re.compile(r"\[[0-9;]*m")
# A header's words: an affinity column's name, or a device column.
_HEADER_WORD = re.compile("|".join(AFFINITY_COLUMNS) + r"|\S+")
# Values `-q -x` prints where it knows nothing ("Not Found": cuda_version of drivers without libcuda).
_ABSENT = ("", "N/A", "Not Found")


def _text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in _ABSENT else value


def _mib(value):
    """'81559 MiB' -> 81559; None when absent."""
    if not value:
        return None
    match = re.match(r"^\s*([0-9]{1,20})\s*MiB", value)
    return int(match.group(1)) if match else None


def _minor_number(gpu: ET.Element) -> int | None:
    """The N of /dev/nvidiaN; None where the driver has no device file (Windows prints N/A)."""
    value = _text(gpu, "minor_number")
    return int(value) if parsing.is_count(value) else None


def _attached(root: ET.Element, text: str) -> int | None:
    value = _text(root, "attached_gpus")
    if value is None:
        return None
    if not parsing.is_count(value):
        raise parsing.fail(SMI_XML, f"<attached_gpus> is {parsing.excerpt(value, 40)}, not a count", text)
    return int(value)


def _document(text: str) -> tuple[ET.Element, list[ET.Element], int | None]:
    """The root of a `-q -x` document, its <gpu> elements and <attached_gpus>; ParseError when it holds no GPU."""
    try:
        root = ET.fromstring(parsing.bounded(SMI_XML, text))
    except ET.ParseError as error:
        # Also a document cut short: the error names the line where it ends.
        raise parsing.fail(SMI_XML, f"not XML ({error})", text) from None
    if root.tag != "nvidia_smi_log":
        raise parsing.fail(SMI_XML, "no <nvidia_smi_log> element", text)
    elements = root.findall("gpu")
    attached = _attached(root, text)
    if not elements:
        said = f" although <attached_gpus> says {attached}" if attached is not None else ""
        raise parsing.fail(SMI_XML, f"no <gpu> element{said}", text)
    if attached is not None and attached < len(elements):
        raise parsing.fail(SMI_XML, f"{len(elements)} <gpu> elements but <attached_gpus> says {attached}", text)
    return root, elements, attached


def parse_smi_xml(text: str) -> dict:
    """The driver, CUDA and per-GPU facts from `nvidia-smi -q -x`.

    `attached_gpus` is how many GPUs the machine has (None where the document does not say); `driver_count` how many
    the document describes. They differ for `-q -x -i N` and for recordings that keep some GPUs only: then each GPU's
    `index` (its place among all) is unknown and None."""
    root, elements, attached = _document(text)
    partial = attached is not None and attached > len(elements)
    gpus = []
    for index, gpu in enumerate(elements):
        gpus.append({
            "index": None if partial else index,
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
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "driver_count": len(gpus),
        "attached_gpus": attached,
        "gpus": gpus,
    }


# Why a GPU runs below its clocks, as `-q -x` names them: <clocks_event_reasons>/<clocks_event_reason_X> since driver
# 535, <clocks_throttle_reasons>/<clocks_throttle_reason_X> before (nvsmi DTD and the recorded fixtures). Drivers before
# 400 lack the thermal and power-brake ones; a reason the document does not hold is None, never "not active".
CLOCK_EVENT_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                       "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown",
                       "display_clocks_setting")
# Uncorrectable ECC counters under <volatile> and <aggregate>: SRAM and DRAM since Ampere's drivers (595 splits SRAM
# into parity and SEC-DED), the per-memory <double_bit> block with its <total> before.
_UNCORRECTABLE = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                  "dram_uncorrectable", "double_bit/total")
_CORRECTABLE = ("sram_correctable", "dram_correctable", "single_bit/total")


def _matched(gpu: ET.Element, path: str, pattern: str, what: str, text: str) -> int | None:
    """The number an element's value holds by pattern; None where the driver reports none (N/A, or no such element)."""
    value = _text(gpu, path)
    if value is None:
        return None
    match = re.match(pattern, value)
    if not match:
        raise parsing.fail(SMI_XML, f"<{path}> of GPU {gpu.get('id')} is {parsing.excerpt(value, 40)}, not {what}", text)
    return int(match.group(1))


def _count(gpu: ET.Element, path: str, text: str) -> int | None:
    return _matched(gpu, path, r"^([0-9]{1,20})(?:\s*bank\(s\))?$", "a count", text)


def _flag(gpu: ET.Element, path: str, text: str, yes: str = "Yes", no: str = "No") -> bool | None:
    value = _text(gpu, path)
    if value is None:
        return None
    if value not in (yes, no):
        raise parsing.fail(SMI_XML, f"<{path}> of GPU {gpu.get('id')} is {parsing.excerpt(value, 40)}, neither {yes} nor {no}",
                           text)
    return value == yes


def _sum(gpu: ET.Element, paths: tuple[str, ...], text: str) -> int | None:
    """The sum of the counters reported; None when none is."""
    counts = [count for count in (_count(gpu, path, text) for path in paths) if count is not None]
    return sum(counts) if counts else None


def _clock_events(gpu: ET.Element, text: str) -> dict[str, bool | None]:
    for block, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                          ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        if gpu.find(block) is not None:
            return {name: _flag(gpu, f"{block}/{prefix}{name}", text, "Active", "Not Active")
                    for name in CLOCK_EVENT_REASONS}
    return dict.fromkeys(CLOCK_EVENT_REASONS)


def _performance_state(gpu: ET.Element, text: str) -> str | None:
    """'P0' to 'P15' (NVML's P-states) or 'Unknown'; None where the driver reports none."""
    value = _text(gpu, "performance_state")
    if value is not None and value != "Unknown" and not re.fullmatch(r"P[0-9]{1,2}", value):
        raise parsing.fail(SMI_XML, f"<performance_state> of GPU {gpu.get('id')} is {parsing.excerpt(value, 40)}, "
                           "not a P-state like P0", text)
    return value


def _width(gpu: ET.Element, path: str, text: str) -> int | None:
    """'16x' -> 16."""
    return _matched(gpu, path, r"^([0-9]{1,20})x$", "a width like 16x", text)


def gpu_counters(text: str) -> list[dict]:
    """Each GPU's health counters from `nvidia-smi -q -x`: uncorrectable and correctable ECC errors (volatile: since
    the driver loaded; aggregate: the GPU's life), retired pages (before Ampere) and remapped rows (Ampere and later),
    the clock event (throttle) reasons and the PCIe link's current and maximum generation and width. A counter the
    driver does not report (N/A, or an element older drivers lack) is None: not reported, never zero."""
    elements = _document(text)[1]
    link = "pci/pci_gpu_link_info"
    counters = []
    for gpu in elements:
        pending = [_flag(gpu, f"retired_pages/{name}", text) for name in ("pending_retirement", "pending_blacklist")]
        counters.append({
            "pci_bus_id": gpu.get("id"),
            "name": _text(gpu, "product_name"),
            "performance_state": _performance_state(gpu, text),
            "ecc": {
                "volatile_uncorrectable": _sum(gpu, tuple(f"ecc_errors/volatile/{p}" for p in _UNCORRECTABLE), text),
                "aggregate_uncorrectable": _sum(gpu, tuple(f"ecc_errors/aggregate/{p}" for p in _UNCORRECTABLE), text),
                "volatile_correctable": _sum(gpu, tuple(f"ecc_errors/volatile/{p}" for p in _CORRECTABLE), text),
                "aggregate_correctable": _sum(gpu, tuple(f"ecc_errors/aggregate/{p}" for p in _CORRECTABLE), text),
            },
            "retired_pages": {
                "single_bit": _count(gpu, "retired_pages/multiple_single_bit_retirement/retired_count", text),
                "double_bit": _count(gpu, "retired_pages/double_bit_retirement/retired_count", text),
                # Drivers name the same flag pending_blacklist (older) and pending_retirement (newer).
                "pending": True if True in pending else (False if False in pending else None),
            },
            "remapped_rows": {
                "correctable": _count(gpu, "remapped_rows/remapped_row_corr", text),
                "uncorrectable": _count(gpu, "remapped_rows/remapped_row_unc", text),
                "pending": _flag(gpu, "remapped_rows/remapped_row_pending", text),
                "failure": _flag(gpu, "remapped_rows/remapped_row_failure", text),
            },
            "clock_events": _clock_events(gpu, text),
            "pcie": {
                "current_gen": _count(gpu, f"{link}/pcie_gen/current_link_gen", text),
                "max_gen": _count(gpu, f"{link}/pcie_gen/max_link_gen", text),
                "current_width": _width(gpu, f"{link}/link_widths/current_link_width", text),
                "max_width": _width(gpu, f"{link}/link_widths/max_link_width", text),
            },
        })
    return counters


class _Unread(ValueError):
    """A line that one way of reading it cannot make sense of; the message says why."""


def _tab_stops(line: str) -> list[str]:
    """A line whose tabs a terminal turned into spaces, cut where the tabs were: a run of spaces that reaches a tab
    stop (every 8 columns) was one tab per stop passed, so empty cells survive; a shorter run belongs to its cell
    (" X ", "CPU Affinity")."""
    cells, cell = [], ""
    for match in re.finditer(r" +|[^ ]+", line):
        stops = match.end() // 8 - match.start() // 8
        if match.group()[0] == " " and stops:
            cells.append(cell)
            cells.extend([""] * (stops - 1))
            cell = ""
        else:
            cell += match.group()
    cells.append(cell)
    return [cell.strip() for cell in cells]


def _words(line: str) -> list[str]:
    """A row's words with glued link types pulled apart; its empty cells are lost."""
    words = []
    for word in line.split():
        words.extend(re.findall(_LINK, word) if GLUED_LINKS.match(word) else [word])
    return words


def _readings(line: str) -> list[tuple[list[str], bool]]:
    """Ways to cut a row into cells, most faithful first, each with whether it keeps empty cells. nvidia-smi writes
    tabs; pasted through a terminal they become spaces, aligned to tab stops unless the text was indented, realigned
    or wrapped, when only its words are left."""
    if "\t" in line:
        return [([cell.strip() for cell in line.split("\t")], True)]
    return [(_tab_stops(line.lstrip(" ")), True), (_words(line), False)]


def _header(lines: list[str], text: str) -> tuple[int, list[str], list[str]]:
    """Where the header is, the devices it names (GPU0.., NIC0.. or RDMA device names) and the columns after them."""
    for number, line in enumerate(lines):
        words = _HEADER_WORD.findall(line)
        if not words or words[0] != "GPU0":
            continue
        split = next((i for i, word in enumerate(words) if word in AFFINITY_COLUMNS), len(words))
        devices, columns = [], words[split:]
        for word in words[:split]:
            devices.extend(re.findall(r"(?:GPU|NIC)[0-9]+", word) if GLUED_DEVICES.match(word) else [word])
        if any(LINK.match(device) for device in devices):
            continue  # the GPU0 row, not a header
        where = f"line {number + 1} (the header)"
        unknown = [word for word in columns if word not in AFFINITY_COLUMNS]
        if unknown:
            raise parsing.fail(SMI_TOPO, f"{where} has columns it does not know after the affinity columns: "
                               f"{' '.join(unknown)}", text)
        if list(columns) != [c for c in AFFINITY_COLUMNS if c in columns] or len(set(columns)) != len(columns):
            raise parsing.fail(SMI_TOPO, f"{where} lists {', '.join(columns)}, not in the order nvidia-smi prints",
                               text)
        gpus = [device for device in devices if device.startswith("GPU") and parsing.is_count(device[3:])]
        if devices[:len(gpus)] != [f"GPU{i}" for i in range(len(gpus))] or len(set(devices)) != len(devices):
            raise parsing.fail(SMI_TOPO, f"{where} names its devices {' '.join(devices)}, not GPU0..GPU{len(gpus) - 1} "
                               "then each other device once", text)
        return number, devices, columns
    raise parsing.fail(SMI_TOPO, "no header row starting with GPU0", text)


def _reported(value: str | None) -> str | None:
    """An affinity cell's value; None for an empty cell or N/A."""
    return None if value in (None, "", "N/A") else value


def _affinity(columns: list[str], tail: list[str], whole: bool) -> dict:
    """CPU and NUMA affinity from the cells after a GPU row's links. Drivers put a second tab before "GPU NUMA ID"
    and before an N/A NUMA affinity, so the first column is read from the left, the last from the right, and the
    one between (NUMA Affinity of three) is the cell in between that is not empty. A row that lost its empty cells
    (`whole` False) can only be read when none was empty."""
    if not whole:
        if len(tail) != len(columns):
            raise _Unread(f"{len(tail)} values for the columns {', '.join(columns)}: which are empty cannot be told "
                          "from text whose tabs were lost")
        named = dict(zip(columns, tail))
    elif not columns:
        if any(tail):
            raise _Unread(f"values {' '.join(cell for cell in tail if cell)} under no column")
        named = {}
    elif len(columns) == 1:
        if any(tail[1:]):
            raise _Unread(f"more values than the column {columns[0]}")
        named = {columns[0]: tail[0] if tail else ""}
    else:
        if len(tail) < len(columns):
            raise _Unread(f"{len(tail)} cells for the columns {', '.join(columns)}")
        between = [cell for cell in tail[1:-1] if cell]
        if len(between) > len(columns) - 2:
            raise _Unread(f"values {' '.join(between)} between {columns[0]} and {columns[-1]}")
        named = {columns[0]: tail[0], columns[-1]: tail[-1]}
        if len(columns) == 3:
            named[columns[1]] = between[0] if between else ""
    if any(" " in value for value in named.values()):
        raise _Unread("an affinity value with a space in it")
    return {"cpus": _reported(named.get("CPU Affinity")), "numa": _reported(named.get("NUMA Affinity"))}


def _row(cells: list[str], whole: bool, devices: list[str], columns: list[str]) -> tuple[str, list[str], dict | None]:
    """One row read one way: its device, its link to each device and, for a GPU, its affinity."""
    name, links, tail = cells[0], cells[1:len(devices) + 1], cells[len(devices) + 1:]
    if name not in devices:
        raise _Unread(f"row {name} is not a column of the header")
    if len(links) < len(devices) or not all(LINK.match(link) for link in links):
        raise _Unread(f"row {name} does not hold a link type for each of {len(devices)} devices")
    if [i for i, link in enumerate(links) if link == "X"] != [devices.index(name)]:
        raise _Unread(f"row {name} does not have its X (self) in its own column")
    if not name.startswith("GPU"):
        if any(tail):
            raise _Unread(f"row {name} has values after its links")
        return name, links, None
    return name, links, _affinity(columns, tail, whole)


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
    column's RDMA device. Reads it as printed (tabs) or pasted (spaces); raises ParseError, naming the output and
    the line, on anything it cannot read."""
    lines = _BARE_SGR.sub("", parsing.strip_ansi(parsing.bounded(SMI_TOPO, text))).splitlines()
    header, devices, columns = _header(lines, text)
    links, affinity = {}, {}
    for number, line in enumerate(lines[header + 1:], start=header + 2):
        if not line.strip() or line.strip() == "Legend:":
            break
        problem = None
        for cells, whole in _readings(line):
            try:
                name, row, gpu = _row(cells, whole, devices, columns)
                break
            except _Unread as error:
                problem = str(error)  # the last reading's: it assumes the least about the layout
        else:
            raise parsing.fail(SMI_TOPO, f"line {number}: {problem}", text)
        if name in links:
            raise parsing.fail(SMI_TOPO, f"line {number}: a second row {name}", text)
        links[name] = dict(zip(devices, row))
        if gpu is not None:
            affinity[name] = gpu
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
