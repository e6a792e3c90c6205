# -*- coding: utf-8 -*-
"""GPU errors that `nvidia-smi -q -x` does not hold: Xid events in the kernel log and NVLink error counters from
`nvidia-smi nvlink -e`."""

from __future__ import annotations

import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing

KERNEL_LOG = "kernel log"
SMI_NVLINK_ERRORS = "nvidia-smi nvlink -e"
# The driver's line for an Xid event, wherever dmesg, journalctl or syslog put it in their own prefix:
# "NVRM: Xid (PCI:0000:44:00): 79, pid=..., name=..., GPU has fallen off the bus." (NVIDIA's Xid catalog).
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>[0-9]+)(?:, (?P<text>.*))?$")
# Drivers from 570 on also print the loss of a GPU over several lines without an Xid
# ("NVRM: The NVIDIA GPU 0000:b3:00.0 ... has fallen off the bus"): the same event as Xid 79.
_FALLEN_GPU = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9A-Fa-f:.]+)\s*$")
_FALLEN = re.compile(r"NVRM: fallen off the bus")
FALLEN_OFF_BUS = 79
# Xids that mean the GPU needs a reset, a reboot or a repair, whatever the application did (NVIDIA's Xid catalog,
# docs.nvidia.com/deploy/xid-errors, "Xid catalog" and its resolution column). Application faults (13, 31, 43, 45)
# and timeouts an application can cause (109) are left out: they say nothing about the node.
FATAL_XIDS = {
    48: "double bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (reset needed)",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error (repeated: link degrading)",
    140: "unrecovered ECC error",
}
# NVLink5 Xids (144 to 150) carry their own severity: "... Fatal XC0 ..." or "... Nonfatal XC0 ...".
NVLINK5_XIDS = range(144, 151)


def _fatal(xid: int, text: str) -> bool:
    if xid in NVLINK5_XIDS:
        return re.search(r"\bFatal\b", text) is not None
    return xid in FATAL_XIDS


def parse_xid(text: str) -> dict:
    """Xid events in kernel log text (dmesg, journalctl -k): each with its GPU's PCI address, number, the driver's
    words and whether it is of a fatal kind; plus the GPUs reported fallen off the bus without an Xid line. An empty
    log raises ParseError: a booted kernel has always logged something, so empty text means it could not be read."""
    if not parsing.bounded(KERNEL_LOG, text).strip():
        raise parsing.fail(KERNEL_LOG, "empty", text)
    events = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        match = _XID.search(line)
        if match:
            xid, words = _count(match.group("xid"), "the Xid", number, KERNEL_LOG, text), (match.group("text") or "").strip()
            events.append({"line": number, "pci": match.group("pci"), "xid": xid, "text": words,
                           "fatal": _fatal(xid, words)})
            continue
        fallen = _FALLEN_GPU.search(line)
        if fallen and any(_FALLEN.search(after) for after in lines[number:number + 3]):
            events.append({"line": number, "pci": fallen.group("pci"), "xid": FALLEN_OFF_BUS,
                           "text": "fallen off the bus (reported without an Xid line)", "fatal": True})
    return {"events": events, "fatal": [event for event in events if event["fatal"]]}


_GPU = re.compile(r"^GPU (?P<index>[0-9]+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
_COUNTER = re.compile(r"^\s+Link (?P<link>[0-9]+): (?P<counter>[A-Za-z ]+?): (?P<value>[0-9]+|N/A)\s*$")


def _count(value: str, what: str, number: int, tool: str, text: str) -> int:
    """A count on line `number` of a tool's output; a ParseError naming the line for one no tool prints."""
    try:
        return parsing.count(value, what)
    except parsing.BadValue as error:
        raise parsing.fail(tool, f"line {number}: {error}", text) from None


def parse_nvlink_errors(text: str) -> dict:
    """`nvidia-smi nvlink -e`: {"gpus": [{"index", "name", "uuid", "links": {link: {counter: value}}}]}. Lines before
    the first GPU line (a shell prompt) are skipped; any other line it does not know raises ParseError, as does output
    without a GPU. A GPU without a link line is kept with no links: it has no NVLink."""
    gpus: list[dict] = []
    for number, line in enumerate(parsing.bounded(SMI_NVLINK_ERRORS, text).splitlines(), start=1):
        gpu = _GPU.match(line)
        if gpu:
            gpus.append({"index": _count(gpu.group("index"), "the GPU index", number, SMI_NVLINK_ERRORS, text),
                         "name": gpu.group("name"), "uuid": gpu.group("uuid"), "links": {}})
            continue
        if not gpus or not line.strip():
            continue
        counter = _COUNTER.match(line)
        if not counter:
            raise parsing.fail(SMI_NVLINK_ERRORS, f"unexpected line {line.strip()!r} under GPU {gpus[-1]['index']}",
                               text)
        value = counter.group("value")
        link = _count(counter.group("link"), "the link", number, SMI_NVLINK_ERRORS, text)
        gpus[-1]["links"].setdefault(link, {})[counter.group("counter")] = (
            None if value == "N/A" else _count(value, "the counter", number, SMI_NVLINK_ERRORS, text))
    if not gpus:
        raise parsing.fail(SMI_NVLINK_ERRORS, "no 'GPU n:' line", text)
    return {"gpus": gpus}
