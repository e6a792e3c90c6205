# -*- coding: utf-8 -*-
"""Cluster acceptance: the verdict on one node (nccl-tests within it, DCGM diagnostics, GPU health counters, Xid
events, NVLink errors) and on each link between two nodes, every check pass, fail or skip with its reason. Pure: it
reads facts and parsed tool output and runs nothing."""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from typing import NamedTuple

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu_errors, limits

# Per-SKU acceptance thresholds (the default table; the inventory's entries go over it key by key), after Azure's node
# health checks (Azure/azurehpc-health-checks, the per-VM-size configurations): nccl-tests all_reduce_perf within the
# node at 16 GiB (-b 16G -e 16G; nccl-tests reads G as 2^30 bytes) must reach these bus bandwidths (GB/s), and each NDR
# (400 Gb/s) NIC 380 Gb/s with GPUDirect RDMA.
GIB16 = 16 * 2**30
THRESHOLDS = {
    "H100 x8": {"message_bytes": GIB16, "all_reduce_busbw_gbs": 460.0, "per_nic_gbps": 380.0,
                "per_nic_rate_gbps": 400.0},
    "H200 x8": {"message_bytes": GIB16, "all_reduce_busbw_gbs": 480.0, "per_nic_gbps": 380.0,
                "per_nic_rate_gbps": 400.0},
    # On A100, nccl-tests reach about 0.75-0.78 of NVLink3's 300 GB/s (superbench's recorded healthy 8 x A100 run:
    # all_reduce 235, all_gather 223, alltoall 224 GB/s; Azure's 228 is 0.76 of it): a SKU entry's own min_fraction
    # replaces the global one.
    "A100 x8": {"message_bytes": GIB16, "all_reduce_busbw_gbs": 228.0, "min_fraction": 0.7},
}
MIN_FRACTION = 0.8
# The collectives run within each node, as nccl-tests names them without "_perf".
NODE_TESTS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
# Checks read from `nvidia-smi -q -x`; a skip reason given under "smi_xml" covers them all.
COUNTER_CHECKS = ("gpu_ecc", "gpu_memory_repair", "gpu_clock_events", "gpu_pcie_link")
CHECKS = (*(f"nccl_{test}" for test in NODE_TESTS), "dcgm_diag", *COUNTER_CHECKS, "gpu_xid", "nvlink_errors")
SKIP_KEYS = (*CHECKS, "smi_xml")
# What a SKU's entry may set: each collective's bus bandwidth within the node (GB/s), the message size it is read at,
# the per-NIC bandwidth a link must reach (Gb/s) and the NIC rate from which that applies, and its own min_fraction.
THRESHOLD_KEYS = (*(f"{test}_busbw_gbs" for test in NODE_TESTS), "message_bytes", "per_nic_gbps", "per_nic_rate_gbps",
                  "min_fraction")
# The SKU as limits.sku() writes it: the model's words, one space, x and the GPU count ("H100 x8", "A100 PCIe x4").
SKU_KEY = re.compile(r"^\S+(?: \S+)* x[1-9][0-9]*$")
SKU_FORMAT = "'<GPU model> x<GPU count>' as a node's acceptance sku gives it, e.g. 'H100 x8' or 'A100 PCIe x4'"
# Clock event reasons that slow a GPU because it is failing, overheating or short of power; the others (idle,
# application clocks, the software power cap under load, sync boost, display clocks) are settings or normal.
SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


class Threshold(NamedTuple):
    """A threshold that judges a check: its value, the SKU entry and key it was read from ("H100 x8.per_nic_gbps")
    and where that entry came from: the default table, the inventory (the thresholds given), or none at all."""
    value: float | None = None
    key: str | None = None
    source: str = "none"


NO_THRESHOLD = Threshold()
# How the reasons name a threshold's source.
SOURCE_WORDS = {"default": "default table", "inventory": "inventory"}


def check(status: str, reason: str | None, measured: float | None = None, unit: str = "", limit: float | None = None,
          fraction: float | None = None, threshold: Threshold = NO_THRESHOLD, detail=None) -> dict:
    result = {"status": status, "reason": reason, "measured": measured, "unit": unit, "limit": limit,
              "fraction": fraction, "threshold": threshold.value, "threshold_key": threshold.key,
              "threshold_source": threshold.source}
    if detail is not None:
        result["detail"] = detail
    return result


def test_name(test: str) -> str:
    """'all_reduce_perf' -> 'all_reduce'."""
    return test[:-len("_perf")] if test.endswith("_perf") else test


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def bandwidth(measured: float, at: str, limit: float | None, basis: str | None, limit_reason: str | None,
              threshold: Threshold, sku: str | None, min_fraction: float) -> dict:
    """A measured bus bandwidth against the SKU's threshold and min_fraction of the physical limit; a figure below
    either fails, naming both numbers and where the threshold came from; without either there is nothing to judge
    against: skip."""
    fraction = round(measured / limit, 3) if limit else None
    numbers = dict(measured=measured, unit="GB/s", limit=limit, fraction=fraction, threshold=threshold)
    failures, notes = [], []
    value = threshold.value
    source = f" ({SOURCE_WORDS[threshold.source]})" if value is not None else ""
    if value is not None and measured < value:
        failures.append(f"{measured:g} GB/s {at} is below the {sku} threshold of {value:g} GB/s{source}")
    if fraction is not None and fraction < min_fraction:
        failures.append(f"{measured:g} GB/s {at} is {fraction:.3g} of the limit {limit:g} GB/s ({basis}), below "
                        f"{min_fraction:g}")
    if value is None:
        notes.append(f"no threshold for this test on {sku or 'this node'}: judged by the fraction of the limit alone")
    if limit is None:
        notes.append(f"the physical limit is unknown ({limit_reason}): judged by the threshold alone")
    if value is None and limit is None:
        return check("skip", f"{measured:g} GB/s {at}, nothing to judge it against: no threshold for this test on "
                             f"{sku or 'this node'} and the physical limit is unknown ({limit_reason})", **numbers)
    if failures:
        return check("fail", "; ".join([*failures, *notes]), **numbers)
    said = [f"{measured:g} GB/s {at}"]
    if fraction is not None:
        said.append(f"{fraction:.2f} of {limit:g} GB/s ({basis})")
    if value is not None:
        said.append(f"threshold {value:g} GB/s{source}")
    return check("pass", "; ".join([", ".join(said), *notes]), **numbers)


def _unreadable(entry: dict) -> str | None:
    """Why a tool's run gave nothing to judge: a parse error, a parser's own failed or incomplete verdict."""
    parsed = entry.get("parsed")
    if isinstance(parsed, Exception):
        return str(parsed)
    if parsed.get("status") in ("failed", "incomplete"):
        said = parsed.get("errors", []) + parsed.get("problems", [])
        return f"{parsed['status']}: " + ("; ".join(said) or "the parser gave no reason")
    if entry.get("rc") not in (None, 0):
        return f"exited with {entry['rc']} although its output reads as complete"
    return None


def _wrong(parsed: dict) -> list[str]:
    """Sizes whose results nccl-tests found wrong (its #wrong column): data corruption, whatever the speed."""
    bad = []
    for row in parsed.get("rows") or []:
        for place in ("out_of_place", "in_place"):
            wrong = (row.get(place) or {}).get("wrong")
            if isinstance(wrong, (int, float)) and wrong > 0:
                bad.append(f"{wrong:g} wrong at {_size(row['size_bytes'])} {place.replace('_', '-')}")
    return bad


def nccl_busbw(entry: dict, threshold: dict | None) -> tuple[float | None, str, list[str]]:
    """The bus bandwidth to judge: at the threshold's message size where it was measured, else at the largest size;
    with where it was taken and the run's problems (a run without rows, wrong results)."""
    parsed = entry["parsed"]
    rows = [row for row in parsed.get("rows") or [] if row.get("size_bytes") is not None]
    if not rows:
        return None, "", ["no result rows"]
    wanted = (threshold or {}).get("message_bytes")
    row = next((r for r in rows if r["size_bytes"] == wanted), None) or max(rows, key=lambda r: r["size_bytes"])
    busbw = (row.get("out_of_place") or {}).get("busbw_gbs")
    if busbw is None:
        busbw = (row.get("in_place") or {}).get("busbw_gbs")
    problems = _wrong(parsed) + ([] if busbw is not None else [f"no busbw at {_size(row['size_bytes'])}"])
    return busbw, f"at {_size(row['size_bytes'])}", problems


def judge_nccl(entry: dict, limit: float | None, basis: str | None, limit_reason: str | None,
               threshold: Threshold, table: dict | None, sku: str | None, min_fraction: float) -> dict:
    why = _unreadable(entry)
    if why:
        return check("fail", f"{entry['test']}: {why}", unit="GB/s", limit=limit, threshold=threshold)
    measured, at, problems = nccl_busbw(entry, table)
    if problems:
        return check("fail", f"{entry['test']}: " + "; ".join(problems), measured, "GB/s", limit, None, threshold)
    return _unvalidated(entry, bandwidth(measured, at, limit, basis, limit_reason, threshold, sku, min_fraction))


def _unvalidated(entry: dict, result: dict) -> dict:
    """A run without result checks (nccl-tests -c 0) cannot have seen wrong data: its verdict says so."""
    if entry["parsed"].get("validated") is False:
        result["reason"] += "; results not validated (-c 0): wrong data would have gone unseen"
    return result


def _label(index: int, counters: dict) -> str:
    return f"GPU {index} ({counters['pci_bus_id']})"


def _verdict(failed: list[str], unreported: list[str], measured: float, unit: str, detail: list,
             what: str, passed: str) -> dict:
    """A counter check over all GPUs: any GPU failing fails it; any GPU that does not report it makes it a skip (a
    counter not read is never a pass)."""
    if failed:
        return check("fail", "; ".join(failed), measured, unit, detail=detail)
    if unreported:
        return check("skip", f"{what} not reported by " + ", ".join(unreported), measured, unit, detail=detail)
    return check("pass", passed, measured, unit, detail=detail)


def judge_ecc(counters: list[dict]) -> dict:
    failed, unreported, total = [], [], 0
    for index, gpu in enumerate(counters):
        ecc = gpu["ecc"]
        volatile, aggregate = ecc["volatile_uncorrectable"], ecc["aggregate_uncorrectable"]
        if volatile is None and aggregate is None:
            unreported.append(_label(index, gpu))
        elif (volatile or 0) > 0 or (aggregate or 0) > 0:
            total += max(volatile or 0, aggregate or 0)
            failed.append(f"{_label(index, gpu)}: uncorrectable ECC errors, {volatile} since the driver loaded, "
                          f"{aggregate} in its life")
    return _verdict(failed, unreported, total, "errors", [g["ecc"] for g in counters], "uncorrectable ECC counts",
                    "no uncorrectable ECC error")


def judge_memory_repair(counters: list[dict]) -> dict:
    failed, unreported = [], []
    for index, gpu in enumerate(counters):
        pages, rows = gpu["retired_pages"], gpu["remapped_rows"]
        if pages["pending"] is None and rows["pending"] is None and rows["failure"] is None:
            unreported.append(_label(index, gpu))
            continue
        problems = []
        if pages["pending"]:
            problems.append(f"page retirement pending ({pages['double_bit']} double-bit, {pages['single_bit']} "
                            "single-bit pages retired): reset the GPU")
        if rows["failure"]:
            problems.append(f"row remapping failed ({rows['uncorrectable']} uncorrectable rows): repair the GPU")
        if rows["pending"]:
            problems.append("a row remap is pending: reset the GPU")
        if problems:
            failed.append(f"{_label(index, gpu)}: " + "; ".join(problems))
    detail = [{"retired_pages": g["retired_pages"], "remapped_rows": g["remapped_rows"]} for g in counters]
    return _verdict(failed, unreported, len(failed), "GPUs", detail, "page retirement and row remapping",
                    "no pending page retirement, pending remap or remapping failure")


def judge_clock_events(counters: list[dict]) -> dict:
    failed, unreported = [], []
    for index, gpu in enumerate(counters):
        events = gpu["clock_events"]
        active = [name for name in SLOWDOWNS if events[name]]
        if active:
            failed.append(f"{_label(index, gpu)}: clocks slowed by {', '.join(active)}")
        elif any(events[name] is None for name in SLOWDOWNS):
            unreported.append(f"{_label(index, gpu)} ("
                              + ", ".join(name for name in SLOWDOWNS if events[name] is None) + ")")
    return _verdict(failed, unreported, len(failed), "GPUs", [g["clock_events"] for g in counters],
                    "slowdown reasons", "no hardware, thermal or power-brake slowdown active")


def _idle(gpu: dict) -> bool:
    """Idle GPUs lower their PCIe link speed to save power: the gen they show then is not the link's."""
    idle = gpu["clock_events"]["gpu_idle"]
    if idle is not None:
        return idle
    state = gpu.get("performance_state") or ""
    return state.startswith("P") and state[1:].isdigit() and int(state[1:]) >= 8


def judge_pcie_link(counters: list[dict]) -> dict:
    """A link below its maximum width fails: width does not change with load, so fewer lanes mean a bad slot, riser
    or cable (the classic cause of low bus bandwidth). A link below its maximum generation fails on a busy GPU; on
    an idle one it is the driver's power saving, so the check asks to be run under load instead of passing."""
    failed, unreported, idle = [], [], []
    for index, gpu in enumerate(counters):
        link = gpu["pcie"]
        if None in link.values():
            unreported.append(_label(index, gpu))
            continue
        problems = []
        if link["current_width"] < link["max_width"]:
            problems.append(f"x{link['current_width']} of x{link['max_width']} lanes")
        if link["current_gen"] < link["max_gen"]:
            if _idle(gpu) and not problems:
                idle.append(f"{_label(index, gpu)} at Gen{link['current_gen']} of Gen{link['max_gen']} while idle")
            else:
                problems.append(f"Gen{link['current_gen']} of Gen{link['max_gen']}")
        if problems:
            failed.append(f"{_label(index, gpu)}: PCIe link degraded, " + ", ".join(problems))
    if idle and not failed:
        return check("skip", "check under load: " + "; ".join(idle), len(idle), "GPUs",
                     detail=[g["pcie"] for g in counters])
    return _verdict(failed, unreported, len(failed), "GPUs", [g["pcie"] for g in counters], "PCIe link state",
                    "every GPU's PCIe link at its maximum generation and width")


def judge_xid(parsed: dict) -> dict:
    fatal = Counter((event["pci"], event["xid"]) for event in parsed["fatal"])
    others = Counter(event["xid"] for event in parsed["events"] if not event["fatal"])
    other = ", ".join(f"{xid} x{count}" for xid, count in sorted(others.items()))
    if fatal:
        said = [f"Xid {xid} ({gpu_errors.FATAL_XIDS.get(xid, 'fatal NVLink error')}) x{count} on PCI {pci}"
                for (pci, xid), count in sorted(fatal.items())]
        return check("fail", "; ".join(said) + (f"; other Xids: {other}" if other else ""),
                     sum(fatal.values()), "events", detail=parsed["events"])
    return check("pass", "no fatal Xid" + (f"; other Xids: {other}" if other else " and no other Xid"),
                 0, "events", detail=parsed["events"])


def judge_nvlink_errors(parsed: dict) -> dict:
    """Counters since the driver loaded: on a node under acceptance every replay, recovery and CRC error counts."""
    failed, total, unreported, links = [], 0, [], 0
    for gpu in parsed["gpus"]:
        for link, counters in sorted(gpu["links"].items()):
            links += 1
            bad = {name: value for name, value in counters.items() if value}
            if bad:
                total += sum(bad.values())
                failed.append(f"GPU {gpu['index']} link {link}: "
                              + ", ".join(f"{name} {value}" for name, value in sorted(bad.items())))
            elif all(value is None for value in counters.values()):
                unreported.append(f"GPU {gpu['index']} link {link}")
    if not links:
        return check("skip", "no GPU reports an NVLink", None, "errors")
    return _verdict(failed, unreported, total, "errors", None, "NVLink error counters",
                    f"no NVLink error on {links} link(s)")


def judge_dcgm(entry: dict) -> dict:
    """dcgmi diag: a warning fails too, acceptance wants a clean diagnostic; a run in which no test passed fails.
    dcgmi exits non-zero when a test fails, so its status counts only against output that reads as a pass."""
    parsed, level = entry["parsed"], entry.get("level")
    if isinstance(parsed, Exception) or parsed.get("status") == "incomplete":
        return check("fail", f"dcgmi diag -r {level}: {_unreadable(entry)}", unit="tests")
    bad = [test for test in parsed.get("tests") or [] if test["result"] in ("fail", "warn")]
    said = []
    for test in bad:
        gpus = [gpu for gpu, result in (test.get("gpus") or {}).items() if result in ("fail", "warn")]
        said.append(f"{test['name']} {test['result']}" + (f" on GPU {', '.join(gpus)}" if gpus else "")
                    + (": " + "; ".join(test["messages"]) if test.get("messages") else ""))
    if bad or parsed["status"] != "pass":
        said = said or [f"status {parsed['status']}", *parsed.get("errors", []), *parsed.get("problems", [])]
        return check("fail", f"dcgmi diag -r {level}: " + "; ".join(said), len(bad), "tests")
    if entry.get("rc") not in (None, 0):
        return check("fail", f"dcgmi diag -r {level}: exited with {entry['rc']} although every test passed", 0,
                     "tests")
    ran = [test for test in parsed.get("tests") or [] if test["result"] == "pass"]
    if not ran:
        return check("fail", f"dcgmi diag -r {level}: no test passed (all skipped or not run)", 0, "tests")
    return check("pass", f"dcgmi diag -r {level}: {len(ran)} test(s) passed", 0, "tests")


def _given(skip: dict, name: str) -> str | None:
    return skip.get(name) or (skip.get("smi_xml") if name in COUNTER_CHECKS else None)


def _number(value: object) -> float | None:
    """value as a finite number, or None. A string that reads as one ("460") counts: -e key=value and templated values
    arrive as strings, and Ansible's own float options (min_fraction) take them too. True and False do not, though
    Python counts them as 1 and 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _value(key: str, value: object) -> tuple[float | int | None, str | None]:
    """A threshold's value as the judge compares with it, or what it must be instead: a threshold of 0 or below passes
    every node, and NaN passes every comparison."""
    number = _number(value)
    if key == "min_fraction":
        return (number, None) if number is not None and 0 < number <= 1 else (None, "give a fraction in (0, 1]")
    if key == "message_bytes":
        whole = number is not None and number > 0 and number.is_integer()
        return (int(number), None) if whole else (None, "give a positive whole number of bytes")
    if number is None or number <= 0:
        return None, f"give a positive finite number ({'GB/s' if key.endswith('_gbs') else 'Gb/s'})"
    return number, None


def _shown(value: object) -> str:
    """value as a message quotes it: short, and never an error of its own (repr refuses ints of over 4300 digits)."""
    try:
        text = repr(value)
    except ValueError:
        return f"an {type(value).__name__} too long to print"
    return text if len(text) <= 40 else f"{text[:37]}..."


def _near(word: object, choices) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_thresholds(thresholds: object, name: str = "thresholds") -> tuple[dict, list[str]]:
    """The thresholds given (the inventory's table), each value as the judge compares with it, and every problem with
    them, naming its key and what is valid: an entry that is not keyed by a SKU, a key no check reads, a value that
    is not a positive finite number, a min_fraction outside (0, 1]. Any of them would judge nothing, silently."""
    if thresholds is None:
        return {}, []
    if not isinstance(thresholds, dict):
        return {}, [f"{name} maps SKUs to their thresholds, e.g. {{'H100 x8': {{'all_reduce_busbw_gbs': 460}}}}, "
                    f"not a {type(thresholds).__name__}"]
    table: dict[str, dict] = {}
    problems = []
    for sku, entry in thresholds.items():
        if not isinstance(sku, str) or not SKU_KEY.match(sku):
            problems.append(f"{name} key {_shown(sku)} is not a SKU{_near(sku, THRESHOLDS)}: write {SKU_FORMAT} (the default "
                            f"table has {', '.join(THRESHOLDS)})")
            continue
        where = f"{name}[{sku!r}]"
        if not isinstance(entry, dict):
            problems.append(f"{where} maps threshold keys ({', '.join(THRESHOLD_KEYS)}) to numbers, not a "
                            f"{type(entry).__name__}")
            continue
        table[sku] = {}
        for key, value in entry.items():
            if key not in THRESHOLD_KEYS:
                problems.append(f"{where} has the unknown key {_shown(key)}{_near(key, THRESHOLD_KEYS)}: valid keys are "
                                f"{', '.join(THRESHOLD_KEYS)}")
                continue
            number, problem = _value(key, value)
            if problem:
                problems.append(f"{where}.{key} is {_shown(value)}: {problem}")
            else:
                table[sku][key] = number
    return table, problems


def read_min_fraction(value: object, name: str = "min_fraction") -> tuple[float | None, list[str]]:
    number, problem = _value("min_fraction", value)
    return number, [f"{name} is {_shown(value)}: {problem}"] if problem else []


def unmatched_skus(table: dict, nodes: dict[str, dict | None], name: str = "thresholds") -> list[str]:
    """Entries of the thresholds given whose SKU no node has (nodes: each node's hpcml_gpu facts): each would judge
    nothing, and the node it was meant for would pass on the fraction of its limit alone."""
    have: Counter[str] = Counter()
    for facts in nodes.values():
        sku, reason = limits.sku(facts or {})
        have[sku or f"no SKU ({reason})"] += 1
    skus = [sku for sku in have if SKU_KEY.match(sku)]
    said = ", ".join(f"{sku} on {count} node(s)" for sku, count in sorted(have.items()))
    return [f"{name}[{sku!r}] matches no node of this play{_near(sku, skus)}: its nodes are {said}. Key the entry "
            f"{SKU_FORMAT}, or leave it out of a run without such nodes" for sku in table if sku not in skus]


def threshold_problems(thresholds: object, min_fraction: object = MIN_FRACTION, nodes: dict | None = None,
                       prefix: str = "") -> list[str]:
    """Everything wrong with the thresholds and min_fraction given (their names prefixed, for the role's variables),
    and with nodes (host -> hpcml_gpu facts), every entry whose SKU none of them has."""
    table, problems = read_thresholds(thresholds, f"{prefix}thresholds")
    problems += read_min_fraction(min_fraction, f"{prefix}min_fraction")[1]
    if nodes is not None:
        problems += unmatched_skus(table, nodes, f"{prefix}thresholds")
    return problems


def sku_thresholds(inventory: dict, sku: str | None) -> dict[str, Threshold]:
    """What judges a node of this SKU: the default table's entry, with the inventory's keys over it one by one (an
    entry that sets all_gather_busbw_gbs keeps the default all_reduce figure), each with where it came from."""
    if sku is None:
        return {}
    given = ((THRESHOLDS.get(sku, {}), "default"), (inventory.get(sku, {}), "inventory"))
    return {key: Threshold(value, f"{sku}.{key}", source) for table, source in given for key, value in table.items()}


def sku_min_fraction(table: dict[str, Threshold], min_fraction: float) -> Threshold:
    """The fraction of the limit a bandwidth must reach: the SKU entry's own, else the global one."""
    return table.get("min_fraction") or Threshold(min_fraction, "min_fraction", "global")


def _validate(nccl: list[dict], skip: dict, thresholds: object, min_fraction: object) -> tuple[dict, float]:
    """The malformed arguments refused before anything is judged; returns the thresholds and min_fraction given, read."""
    inventory, problems = read_thresholds(thresholds)
    fraction, wrong = read_min_fraction(min_fraction)
    problems += wrong
    if problems:
        raise ValueError("; ".join(problems))
    unknown = sorted(set(skip) - set(SKIP_KEYS))
    if unknown:
        raise ValueError(f"skip names checks that do not exist: {', '.join(unknown)} (known: {', '.join(SKIP_KEYS)})")
    empty = sorted(name for name, reason in skip.items() if not reason or not str(reason).strip())
    if empty:
        raise ValueError(f"skip gives no reason for {', '.join(empty)}")
    seen = Counter(test_name(entry["test"]) for entry in nccl if entry["scope"] == "node")
    twice = sorted(test for test, count in seen.items() if count > 1)
    if twice:
        raise ValueError(f"nccl holds more than one node-scope run of {', '.join(twice)}")
    odd = sorted(test for test in seen if test not in NODE_TESTS)
    if odd:
        raise ValueError(f"nccl holds node-scope tests that are not judged: {', '.join(odd)} "
                         f"(known: {', '.join(NODE_TESTS)})")
    peerless = [entry["test"] for entry in nccl if entry["scope"] == "pair" and not entry.get("peer")]
    if peerless:
        raise ValueError(f"pair-scope nccl runs without a peer: {', '.join(peerless)}")
    return inventory, fraction


def judge(gpu: dict | None, rdma: dict | None, gpudirect: dict | None, *, nccl: list[dict] = (),
          dcgm: dict | None = None, counters: list[dict] | Exception | None = None,
          xid: dict | Exception | None = None, nvlink: dict | Exception | None = None, thresholds: dict | None = None,
          min_fraction: float = MIN_FRACTION, skip: dict | None = None, node: str | None = None,
          peers: dict | None = None) -> dict:
    """One node's acceptance. nccl: [{test, scope: node|pair, peer, parsed, rc}] with parse_nccl_tests's result (or
    the exception it raised) under parsed; dcgm: {level, parsed, rc} likewise; counters: gpu.gpu_counters(); xid:
    gpu_errors.parse_xid(); nvlink: gpu_errors.parse_nvlink_errors(); an exception in place of a parsed output fails
    its check with the exception's message. thresholds: the inventory's SKU table, over THRESHOLDS key by key
    (sku_thresholds). skip: check name (or 'smi_xml' for the counter checks) -> why the role did not run it. peers:
    peer name -> its limits, for the links.
    A check with neither output nor skip reason raises ValueError, as does any other malformed argument (thresholds
    included: read_thresholds): a check that silently vanished is worse than a loud failure."""
    skip, nccl = dict(skip or {}), list(nccl)
    inventory, min_fraction = _validate(nccl, skip, thresholds, min_fraction)
    node_sku, sku_reason = limits.sku(gpu or {})
    own = limits.limits(gpu, rdma, gpudirect, None if isinstance(counters, Exception) else counters)
    judged_by = sku_thresholds(inventory, node_sku)
    table = {key: threshold.value for key, threshold in judged_by.items()} or None
    fraction = sku_min_fraction(judged_by, min_fraction)
    min_fraction = fraction.value
    gpu_present = bool((gpu or {}).get("present"))
    checks: dict[str, dict] = {}

    def absent(name: str) -> dict:
        reason = _given(skip, name)
        if reason:
            return check("skip", reason)
        if not gpu_present:
            return check("skip", "no NVIDIA GPU on this node")
        topology = (gpu or {}).get("topology")
        if name == "nvlink_errors" and topology is not None and not topology.get("nvlink"):
            return check("skip", "no NVLink between the GPUs (nvidia-smi topo -m)")
        raise ValueError(f"check {name}: no output to judge and no reason in skip")

    runs = {test_name(entry["test"]): entry for entry in nccl if entry["scope"] == "node"}
    for test in NODE_TESTS:
        name = f"nccl_{test}"
        entry = runs.get(test)
        if entry is None:
            checks[name] = absent(name)
            continue
        threshold = judged_by.get(f"{test}_busbw_gbs", NO_THRESHOLD)
        checks[name] = judge_nccl(entry, own["intra_node_busbw_gbs"], own["intra_node_basis"],
                                  own["reasons"].get("intra_node"), threshold, table, node_sku, min_fraction)
    checks["dcgm_diag"] = judge_dcgm(dcgm) if dcgm is not None else absent("dcgm_diag")
    smi = "nvidia-smi -q -x"
    for name, parsed, judge_one, tool in (("gpu_ecc", counters, judge_ecc, smi),
                                          ("gpu_memory_repair", counters, judge_memory_repair, smi),
                                          ("gpu_clock_events", counters, judge_clock_events, smi),
                                          ("gpu_pcie_link", counters, judge_pcie_link, smi),
                                          ("gpu_xid", xid, judge_xid, "kernel log"),
                                          ("nvlink_errors", nvlink, judge_nvlink_errors, "nvidia-smi nvlink -e")):
        if parsed is None:
            checks[name] = absent(name)
        elif isinstance(parsed, Exception):
            checks[name] = check("fail", f"{tool}: {parsed}")
        else:
            checks[name] = judge_one(parsed)
    links = [link_record(node, run, judge_link(run, own, (peers or {}).get(run["peer"]), judged_by, node_sku,
                                               min_fraction))
             for run in nccl if run["scope"] == "pair"]
    failed = any(c["status"] == "fail" for c in checks.values()) or any(li["status"] == "fail" for li in links)
    return {"status": "fail" if failed else "pass", "sku": node_sku, "sku_reason": sku_reason, "limits": own,
            "thresholds": table, "min_fraction": min_fraction, "min_fraction_source": fraction.source, "checks": checks,
            "links": links}


def _ranks_per_host(parsed: dict) -> int | None:
    hosts = Counter(rank.get("host") for rank in parsed.get("ranks") or [])
    return min(hosts.values()) if hosts and None not in hosts else None


def judge_link(entry: dict, limits_a: dict, limits_b: dict | None, table: dict[str, Threshold], sku: str | None = None,
               min_fraction: float = MIN_FRACTION) -> dict:
    """A cross-node nccl-tests run between two nodes. Its limit is the lesser node's bus bandwidth across nodes, with
    the NICs in use no more than the GPUs each node ran (one rank drives its nearest NIC). Its threshold, where the
    SKU's thresholds (table: sku_thresholds) have a per-NIC one for NICs of that rate and both ends have GPUDirect
    RDMA, is that rate times those NICs."""
    why = _unreadable(entry)
    if why:
        return check("fail", f"{entry['test']}: {why}", unit="GB/s")
    ends = [limits_a] + ([limits_b] if limits_b else [])
    ranks = _ranks_per_host(entry["parsed"])
    known = [end for end in ends if end["per_nic_gbps"] is not None]
    limit = basis = reason = None
    if len(known) == len(ends):
        nics = min([end["nic_count"] for end in ends] + ([ranks] if ranks else []))
        rate = min(end["per_nic_gbps"] for end in ends)
        intra = [end["intra_node_busbw_gbs"] for end in ends if end["intra_node_busbw_gbs"] is not None]
        limit, basis = round(nics * rate / 8, 3), f"{nics} NIC port(s) at {rate:g} Gb/s"
        if intra and min(intra) < limit:
            limit, basis = min(intra), "the slower node's links within it"
    else:
        reason = "; ".join(end["reasons"].get("inter_node", "?") for end in ends if end["per_nic_gbps"] is None)
    min_fraction = sku_min_fraction(table, min_fraction).value
    per_nic, threshold = table.get("per_nic_gbps"), NO_THRESHOLD
    if per_nic and limit is not None and all(end["gpudirect"] for end in ends) \
            and rate >= table.get("per_nic_rate_gbps", Threshold(0)).value:
        threshold = per_nic._replace(value=round(per_nic.value * nics / 8, 3))
    measured, at, problems = nccl_busbw(entry, None)
    if problems:
        return check("fail", f"{entry['test']}: " + "; ".join(problems), measured, "GB/s", limit, None, threshold)
    result = _unvalidated(entry, bandwidth(measured, at, limit, basis, reason, threshold, sku, min_fraction))
    if limits_b is None:
        result["reason"] += "; the peer's limits were not given: judged on this node's alone"
    return result


def link_record(node: str | None, entry: dict, result: dict) -> dict:
    """A link's verdict as the cluster summary lists it."""
    return {"a": node, "b": entry["peer"], "test": test_name(entry["test"]), "status": result["status"],
            "busbw_gbs": result["measured"], "limit_gbs": result["limit"], "fraction": result["fraction"],
            "threshold_gbs": result["threshold"], "threshold_key": result["threshold_key"],
            "threshold_source": result["threshold_source"], "reason": result["reason"]}
