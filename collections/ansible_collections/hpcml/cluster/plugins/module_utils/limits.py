# -*- coding: utf-8 -*-
"""A node's physical bandwidth limits, from its facts: what its NVLink or PCIe links and its RDMA NICs can carry at
most, so that a measured bus bandwidth can be judged as a fraction of what this very node could do."""

from __future__ import annotations

import re

# NVLink generation and links per GPU of each data-centre GPU, by model (NVIDIA's datasheets): V100 SXM2 6 links of
# NVLink2 (300 GB/s both directions); A100 SXM4 12 of NVLink3 (600 GB/s); A800 8 of NVLink3 (400 GB/s, the export
# variant); H100/H200/H20 SXM5 18 of NVLink4 (900 GB/s); H800 8 of NVLink4 (400 GB/s, export variant); B200, B300,
# GB200 and GB300 18 of NVLink5 (1.8 TB/s). The links count is the most a GPU has: PCIe cards bridge fewer.
NVLINK = {
    "V100": (2, 6), "A100": (3, 12), "A800": (3, 8),
    "H100": (4, 18), "H200": (4, 18), "H20": (4, 18), "H800": (4, 8),
    "B200": (5, 18), "B300": (5, 18), "GB200": (5, 18), "GB300": (5, 18),
}
# GB/s one NVLink carries in one direction, by generation: 25 for NVLink2, 3 and 4 (each generation halved the lanes
# and doubled their rate: 300, 600 and 900 GB/s over 6, 12 and 18 links, both directions), 50 for NVLink5 (1.8 TB/s
# over 18 links).
NVLINK_GBS_PER_DIRECTION = {2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# GB/s one PCIe lane carries in one direction, by generation, after line encoding (PCI-SIG): Gen1 2.5 GT/s and Gen2
# 5 GT/s with 8b/10b; Gen3 8 GT/s, Gen4 16 and Gen5 32 GT/s with 128b/130b; Gen6 64 GT/s in 256-byte FLITs of which
# 242 bytes carry data (x16: 121 GB/s).
PCIE_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# Words in product names that say nothing about the model ("NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB").
_BRANDS = {"NVIDIA", "Tesla", "GeForce", "Quadro"}
# Series words that need the next word to name a model ("RTX 4090", "RTX A6000").
_SERIES = {"RTX", "GTX", "TITAN"}


def model(name: str | None) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; 'NVIDIA A100-PCIE-40GB' -> 'A100 PCIe'; 'NVIDIA H100 NVL' -> 'H100 NVL';
    'NVIDIA GeForce RTX 4090' -> 'RTX 4090'. The form factor is kept where it is not SXM: a PCIe card of the same GPU
    has other links and other thresholds."""
    if not name:
        return None
    words = [w for w in name.split() if w not in _BRANDS]
    if not words:
        return None
    base = words[0].split("-")[0]
    if base in _SERIES and len(words) > 1:
        base = f"{base} {words[1]}"
    parts = {part.upper() for word in words for part in word.split("-")}
    for form in ("PCIe", "NVL"):
        if form.upper() in parts:
            return f"{base} {form}"
    return base


def sku(gpu: dict) -> tuple[str | None, str | None]:
    """The node's SKU as the threshold table keys it ('H100 x8'), or None and why."""
    if not gpu or not gpu.get("present"):
        return None, "no NVIDIA GPU on this node"
    names = {model(g.get("name")) for g in gpu.get("gpus") or []}
    if not names:
        return None, gpu.get("reason") or "nvidia-smi described no GPU"
    if len(names) > 1 or None in names:
        return None, "GPUs of different or unnamed models: {}".format(", ".join(sorted(str(n) for n in names)))
    return f"{names.pop()} x{len(gpu['gpus'])}", None


def _nvlink_degrees(topology: dict) -> dict[str, dict[str, int]]:
    """Each GPU's NVLink bonds: {GPU0: {GPU1: 18, ...}} from `topo -m`'s NV# cells."""
    gpus = [d for d in topology["devices"] if d.startswith("GPU")]
    return {g: {p: int(topology["links"][g][p][2:]) for p in gpus
                if p != g and re.match(r"^NV[0-9]{1,3}$", topology["links"][g][p])} for g in gpus}


def _connected(bonds: dict[str, dict[str, int]]) -> bool:
    """Whether NVLink alone joins every GPU: otherwise a collective over all of them crosses PCIe."""
    if not bonds:
        return False
    seen, todo = set(), [next(iter(bonds))]
    while todo:
        here = todo.pop()
        if here not in seen:
            seen.add(here)
            todo.extend(bonds[here])
    return len(seen) == len(bonds)


def nvlink_limit(name: str, topology: dict, nvswitch_count: int) -> tuple[dict | None, str | None]:
    """NVLink generation, links per GPU and GB/s per direction, or None and why. topo -m prints NV18 between every
    pair of GPUs behind NVSwitches (each GPU's 18 links reach all peers) but NV1/NV2 per pair in a direct mesh (DGX-1):
    the links a GPU has are the sum over its peers, unless that sum exceeds what the model has (or NVSwitches sit on
    the bus), when they are the largest bond. The slowest GPU bounds a collective: the node's figure is the least."""
    base = (model(name) or "").split()[0] if model(name) else None
    bonds = _nvlink_degrees(topology)
    if not any(bonds.values()):
        return None, "no NVLink between the GPUs"
    if not _connected(bonds):
        return None, "NVLink does not join every GPU: a collective over all of them crosses PCIe"
    if base not in NVLINK:
        return None, f"the NVLink generation of {name} is not in the table"
    generation, most = NVLINK[base]
    per_gpu = []
    for peers in bonds.values():
        total = sum(peers.values())
        per_gpu.append(max(peers.values()) if total > most or nvswitch_count > 0 else total)
    links = min(per_gpu)
    return {"generation": generation, "links_per_gpu": links, "per_link_gbs": NVLINK_GBS_PER_DIRECTION[generation],
            "gbs": links * NVLINK_GBS_PER_DIRECTION[generation]}, None


def pcie_limit(counters: list[dict] | None) -> tuple[dict | None, str | None]:
    """The slowest GPU's PCIe link at its maximum generation and width, per direction, or None and why."""
    if not counters:
        return None, "no nvidia-smi -q -x to read the PCIe links from"
    links = []
    for index, gpu in enumerate(counters):
        gen, width = gpu["pcie"]["max_gen"], gpu["pcie"]["max_width"]
        if gen is None or width is None:
            return None, f"GPU {index} ({gpu['pci_bus_id']}) does not report its maximum PCIe generation and width"
        if gen not in PCIE_GBS_PER_LANE:
            return None, f"GPU {index} reports PCIe Gen{gen}, not in the table"
        links.append((PCIE_GBS_PER_LANE[gen] * width, gen, width))
    gbs, gen, width = min(links)
    return {"generation": gen, "width": width, "gbs": round(gbs, 3)}, None


def _fabric_ports(rdma: dict, gpudirect: dict | None) -> tuple[list[dict], str | None]:
    """The active RDMA ports NCCL would use: not an NVSwitch management port, and where the GPU/NIC topology is
    known, on a NIC that is nearest to some GPU (a storage or front-end NIC is not); or none and why."""
    near = {nic for entry in ((gpudirect or {}).get("nearest_nics") or {}).values() for nic in entry["nics"]}
    active = [(device["name"], port) for device in rdma.get("devices") or [] if not device.get("nvswitch_management")
              for port in device.get("ports") or [] if port.get("state") == "ACTIVE"]
    if not active:
        return [], rdma.get("reason") or "no active RDMA port"
    ports = [port for name, port in active if not near or name in near]
    if not ports:
        return [], f"no active RDMA port on a NIC nearest to a GPU ({', '.join(sorted(near))})"
    return ports, None


def limits(gpu: dict | None, rdma: dict | None, gpudirect: dict | None, counters: list[dict] | None) -> dict:
    """The node's limits: bus bandwidth within the node (GB/s per direction of the links that bound a collective over
    all its GPUs), per NIC rate (Gb/s) and count, bus bandwidth across nodes, and the GPUDirect route; each figure
    that cannot be known is None with its reason under `reasons`."""
    reasons: dict[str, str] = {}
    result = {"intra_node_busbw_gbs": None, "intra_node_basis": None, "nvlink": None, "pcie": None,
              "per_nic_gbps": None, "nic_count": 0, "inter_node_busbw_gbs": None, "inter_node_basis": None,
              "gpudirect": None, "reasons": reasons}
    result["pcie"], why = pcie_limit(counters)
    if why:
        reasons["pcie"] = why
    gpus = (gpu or {}).get("gpus") or []
    topology = (gpu or {}).get("topology")
    if not gpu or not gpu.get("present"):
        reasons["intra_node"] = "no NVIDIA GPU on this node"
    elif len(gpus) < 2:
        reasons["intra_node"] = f"{len(gpus)} GPU(s) described by nvidia-smi: no collective within the node"
    elif topology is None:
        reasons["intra_node"] = f"the GPU topology is unknown: {gpu.get('topology_error') or 'no topo -m'}"
    else:
        result["nvlink"], why = nvlink_limit(gpus[0].get("name"), topology, gpu.get("nvswitch_count") or 0)
        if result["nvlink"]:
            nv = result["nvlink"]
            result["intra_node_busbw_gbs"] = nv["gbs"]
            result["intra_node_basis"] = (f"NVLink{nv['generation']} x{nv['links_per_gpu']} at {nv['per_link_gbs']:g} "
                                          "GB/s per direction")
        elif result["pcie"]:
            result["intra_node_busbw_gbs"] = result["pcie"]["gbs"]
            result["intra_node_basis"] = f"PCIe Gen{result['pcie']['generation']} x{result['pcie']['width']} ({why})"
        else:
            reasons["intra_node"] = f"{why}; and the PCIe links are unknown: {reasons['pcie']}"
    if gpudirect:
        result["gpudirect"] = bool(gpudirect.get("ready"))
    else:
        reasons["gpudirect"] = "no GPUDirect facts"
    ports, why = _fabric_ports(rdma or {}, gpudirect)
    rates = [port.get("rate_gbps") for port in ports]
    if why:
        reasons["inter_node"] = why
    elif None in rates:
        reasons["inter_node"] = "an active RDMA port does not report its rate"
    else:
        result["per_nic_gbps"], result["nic_count"] = min(rates), len(ports)
        nics = result["nic_count"] * result["per_nic_gbps"] / 8
        basis = f"{result['nic_count']} NIC port(s) at {result['per_nic_gbps']:g} Gb/s"
        if result["intra_node_busbw_gbs"] is not None and result["intra_node_busbw_gbs"] < nics:
            nics, basis = result["intra_node_busbw_gbs"], f"{result['intra_node_basis']}, below {basis}"
        result["inter_node_busbw_gbs"], result["inter_node_basis"] = round(nics, 3), basis
    return result
