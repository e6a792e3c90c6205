# -*- coding: utf-8 -*-
"""NVIDIA nccl-tests results: the text table every *_perf binary prints, or the document its `-J file.json` writes."""

from __future__ import annotations

import json
import os
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing

TOOL = "nccl-tests"
# `mpirun --tag-output` puts "[job,rank]<stdout>:" before every line a rank prints.
_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
# Since nccl-tests 2.17.4 (October 2025); builds from a git checkout add "(commit)" after the version.
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)(?: \([0-9a-f]+\))? nccl-headers=(\d+) nccl-library=(\d+)")
_STARTING = re.compile(r"^#\s*Collective test (?:starting|concluded): (\S+)")
# The run's parameters; a paste through Markdown can lose the leading "#".
_PARAMS = re.compile(r"^#?\s*nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+")
# "#   Rank  0 on host device 0 [0x1a] name" (2018), "... Pid 12 on ..." (2019), "#  Rank  0 Group  0 Pid ..." (2022),
# with the PCI address "[0000:1a:00]" since 2.16 (2025).
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_COLUMNS = re.compile(r"^#\s+size\s+count\s+type\b")
_OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_AVERAGE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s")
# Lines that say a rank failed: nccl-tests' own checks (common.cu) and NCCL's warnings.
# "# error:" is the last error NCCL recorded, printed at the end of a run since 2.17.3.
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|NCCL WARN|Invalid number of GPUs|^#\s*error: ")
# NCCL_DEBUG=VERSION (or INFO) prints the library's version; the table header has it only since 2.17.4.
_NCCL_VERSION = re.compile(r"(?:^|NCCL INFO )NCCL version (\d+\.\d+\.\d+)")
# A shell prompt or launcher line names the binary: ./build/all_reduce_perf, all_reduce_perf_mpi.
_BINARY = re.compile(r"(?:^|[/\s])([a-z_]+_perf(?:_mpi)?)(?=\s|$)")
_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.21.5": X*10000+Y*100+Z since NCCL 2.9, X*1000+Y*100+Z before."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def parse_nccl_tests(text: str) -> dict:
    """The ranks, the result rows and the summary of an nccl-tests run, with a status that says whether the run was
    whole and clean ("ok"), cut short ("incomplete") or reported a failure ("failed"); `problems` says why it is not ok.
    Output that is not nccl-tests' (nothing of its header, rows or summary, nor a failure it reports) raises
    ParseError."""
    if not text or not text.strip():
        raise parsing.fail(TOOL, "no output", text or "")
    if text.lstrip().startswith("{"):
        return _parse_document(text)
    return _parse_table(text)


def _result(test, tests_version, version, ranks, rows, average, out_of_bounds, errors, cut, unvalidated=0) -> dict:
    # A document's cells can be "nan", and trace replays write no out-of-place block.
    busbw = [row["out_of_place"]["busbw_gbs"] for row in rows
             if row["out_of_place"] and row["out_of_place"]["busbw_gbs"] is not None]
    problems = list(errors)
    problems.extend(cut)
    status = "failed" if errors else "incomplete" if cut else "ok"
    return {
        "status": status,
        "test": test,
        "nccl_tests_version": tests_version,
        "nccl_version": version,
        "ranks": ranks,
        "rows": rows,
        "avg_busbw_gbs": average,
        "max_busbw_gbs": max(busbw, default=None),
        "out_of_bounds": out_of_bounds,
        # Rows run with -c 0 measure bandwidth without checking the data: not a failure, but not proof of correctness.
        "validated": bool(rows) and not unvalidated,
        "errors": errors,
        "problems": problems,
    }


def _parse_table(text: str) -> dict:
    test = tests_version = version = average = out_of_bounds = columns = None
    params = False
    ranks, rows, errors, cut = [], [], [], []
    unvalidated = 0
    lines = [_TAG.sub("", line.rstrip("\r")) for line in text.splitlines()]
    for number, line in enumerate(lines):
        last = number == len(lines) - 1
        match = _VERSION.match(line)
        if match:
            tests_version, version = match.group(1), nccl_version(int(match.group(3)))
            continue
        match = _STARTING.match(line)
        if match:
            test = test or _test_name(match.group(1))
            continue
        if _PARAMS.match(line):
            params = True
            continue
        match = _RANK.match(line)
        if match:
            ranks.append(_rank(match))
            continue
        if _COLUMNS.match(line):
            columns = _columns(line, text)
            continue
        match = _OUT_OF_BOUNDS.match(line)
        if match:
            out_of_bounds = int(match.group(1))
            if match.group(2) == "FAILED" or out_of_bounds:
                errors.append(line.strip())
            continue
        match = _AVERAGE.match(line)
        if match:
            average = _float(match.group(1))
            if average is None:
                errors.append(f"the average bus bandwidth is not a number: {line.strip()!r}")
            elif match.group(2) == "FAILED":
                errors.append(line.strip())
            continue
        if _FAILURE.search(line):
            # A rank that fails while a row is printed glues its failure to the row's start.
            errors.append(line.strip())
            continue
        if _ROW_START.match(line) and (columns is not None or _TYPED_ROW.match(line)):
            read = _row(line, columns or _LAYOUT)
            if read is None:
                cut.append(f"a result row is cut short or garbled: {line.strip()!r}"
                           if last else f"a result row could not be read: {line.strip()!r}")
                continue
            row, checked = read
            rows.append(row)
            unvalidated += not checked
            for block in ("out_of_place", "in_place"):
                wrong = (row[block] or {}).get("wrong")
                if wrong:
                    errors.append(f"{wrong} wrong elements {block.replace('_', '-')} at {row['size_bytes']} bytes: "
                                  f"{line.strip()!r}")
            continue
        match = _NCCL_VERSION.search(line)
        if match:
            version = version or match.group(1)
            continue
        match = _BINARY.search(line)
        if match and test is None and not line.startswith("#"):
            test = _test_name(match.group(1))
    if not (params or ranks or columns or rows or average is not None or tests_version):
        if any(line.strip().startswith(("Test NCCL failure", "Test CUDA failure")) or ": Test " in line
               for line in lines):
            return _result(test, None, version, [], [], None, None, errors, ["no nccl-tests header"])
        raise parsing.fail(TOOL, "no nccl-tests header, rank line, result table or summary", text)
    if not params:
        cut.append("the output is cut at the top: no \"# nThread ... nGpus ...\" parameter line")
    if not ranks:
        cut.append("the output is cut at the top: no \"# Rank N ... device\" line")
    if columns is None:
        cut.append("no result table header (\"#  size  count  type ...\")")
    elif not rows:
        cut.append("no result row")
    if average is None:
        cut.append("the output is cut at the bottom: no \"# Avg bus bandwidth\" summary")
    return _result(test, tests_version, version, ranks, rows, average, out_of_bounds, errors, cut, unvalidated)


def _test_name(program: str) -> str:
    """The collective's binary without the suffix of its MPI build: all_reduce_perf_mpi -> all_reduce_perf."""
    return program[:-len("_mpi")] if program.endswith("_perf_mpi") else program


# The table since 2.13, for rows whose header was cut off; such a row must name one of nccl-tests' data types.
_TYPED_ROW = re.compile(r"^\s*\d+\s+\d+\s+(?:u?int(?:8|32|64)|half|float|double|bfloat16|f8e4m3|f8e5m2|char|int)\s")
_LAYOUT = {"operation": ["size", "count", "type", "redop", "root"], "width": 8,
           "blocks": [(0, ["time", "algbw", "busbw", "#wrong"]), (4, ["time", "algbw", "busbw", "#wrong"])]}


def _rank(match) -> dict:
    bus_id = match.group(6).strip() or None
    return {
        "rank": int(match.group(1)),
        "group": int(match.group(2)) if match.group(2) is not None else None,
        "pid": int(match.group(3)) if match.group(3) is not None else None,
        "host": match.group(4),
        "device": int(match.group(5)),
        "bus_id": bus_id,
        "name": match.group(7) or None,
    }


def _columns(line: str, text: str) -> dict:
    """The table's column names: those before the first time column describe the operation, the rest are measured."""
    names = line.lstrip("#").split()
    first = next((i for i, name in enumerate(names) if name in ("time", "cputime")), None)
    if first is None:
        raise parsing.fail(TOOL, f"a result table header without a time column: {line.strip()!r}", text)
    measured = names[first:]
    starts = [i for i, name in enumerate(measured) if name in ("time", "cputime")]
    if len(starts) != 2:
        raise parsing.fail(TOOL, f"a result table header without out-of-place and in-place columns: {line.strip()!r}",
                           text)
    return {
        "operation": names[:first],
        "width": len(measured) + (1 if "timestamp" in measured else 0),
        "blocks": [(start, measured[start:start + 4]) for start in starts],
    }


def _row(line: str, columns: dict):
    """A result row and whether it was checked (its out-of-place #wrong not N/A); None for a line that is no whole
    row. In-place alone may be N/A in a checked run: nccl-tests checks no in-place alltoall (src/alltoall.cu, 2.17.6)."""
    tokens = line.split()
    width = columns["width"]
    if len(tokens) < width + 3:
        return None
    head, measured = tokens[:-width], tokens[-width:]
    if len(head) > len(columns["operation"]) or not head[0].isdigit() or not head[1].isdigit():
        return None
    # An operation without a reduction (alltoall before 2.13) leaves the redop cell empty: the cells it has are
    # named by what they hold, a root being a number.
    redop = root = None
    for cell in head[3:]:
        if re.match(r"^-?\d+$", cell):
            root = None if int(cell) < 0 else int(cell)
        else:
            redop = None if cell == "none" else cell
    row = {"size_bytes": int(head[0]), "count": int(head[1]), "type": head[2], "redop": redop, "root": root}
    checked = False
    for key, (start, names) in zip(("out_of_place", "in_place"), columns["blocks"]):
        block = _block(measured[start:start + 4], names)
        if block is None:
            return None
        row[key] = block
        if key == "out_of_place":
            checked = measured[start + 3] != "N/A"
    return row, checked


def _block(cells: list, names: list):
    """One of a row's two measured blocks: time, algbw, busbw and the wrong elements, which the header calls "#wrong"
    since 2.13 (a count, printed "%g" and so "1.04858e+06" when large) and "error" before (the largest deviation).
    Per-iteration reports (-I) add four columns after them, which are not read."""
    if len(cells) < 4 or len(names) < 4:
        return None
    time, algbw, busbw = (_float(cell) for cell in cells[:3])
    if time is None or algbw is None or busbw is None:
        return None
    cell = cells[3]
    if cell != "N/A" and _float(cell) is None:
        return None
    # A deviation (before 2.13) is judged by the out-of-bounds count, not here.
    wrong = int(float(cell)) if cell != "N/A" and names[3] == "#wrong" else None
    return {"time_us": time, "algbw_gbs": algbw, "busbw_gbs": busbw, "wrong": wrong}


def _float(cell):
    return float(cell) if _NUMBER.match(cell or "") else None


# The JSON document (-J, nccl-tests 2.17.3 and later; src/util.cu). Booleans are written as the strings "true" and
# "false", NaN as "nan", and before 2.17.9 the average was spelt "average_bus_bandwidith" / "bandwidith".
_AVERAGE_KEYS = (("average_bus_bandwidth", "bandwidth"), ("average_bus_bandwidith", "bandwidith"))


def _parse_document(text: str) -> dict:
    try:
        document = json.loads(text)
    except ValueError as error:
        raise parsing.fail(TOOL, f"not a whole JSON document ({error})", text) from None
    if not isinstance(document, dict) or ("config" not in document and "results" not in document):
        raise parsing.fail(TOOL, "a JSON document without nccl-tests' \"config\" or \"results\"", text)
    errors, cut = [], []
    args = document.get("args") or []
    test = _test_name(os.path.basename(args[0])) if args and isinstance(args[0], str) else None
    code = document.get("nccl_version")
    version = nccl_version(code) if isinstance(code, int) and code > 0 else None
    config = document.get("config")
    ranks = [_document_rank(device) for device in (config or {}).get("devices") or []]
    rows = []
    for result in document.get("results") or []:
        row = _document_row(result)
        for block in ("out_of_place", "in_place"):
            wrong = (row[block] or {}).get("wrong")
            if wrong:
                errors.append(f"{wrong} wrong elements {block.replace('_', '-')} at {row['size_bytes']} bytes")
        rows.append(row)
    unvalidated = sum(1 for result in document.get("results") or [] if _nwrong_absent(result))
    bounds = document.get("out_of_bounds")
    out_of_bounds = bounds.get("count") if isinstance(bounds, dict) else None
    if isinstance(bounds, dict) and (out_of_bounds or _false(bounds.get("okay"))):
        errors.append(f"out of bounds values: {out_of_bounds}")
    average = None
    for key, field in _AVERAGE_KEYS:
        if isinstance(document.get(key), dict):
            average = document[key].get(field)
            average = None if average == "nan" else average
            if _false(document[key].get("okay")):
                errors.append(f"the average bus bandwidth {average} is below the one asked for")
    # A clean run writes [""]: ncclGetLastError's empty string.
    errors.extend(str(error) for error in document.get("errors") or [] if str(error).strip())
    if config is None:
        cut.append("the document has no \"config\"")
    if not ranks:
        cut.append("the document lists no device")
    if not rows:
        cut.append("the document has no result")
    if average is None:
        cut.append("the document has no average bus bandwidth")
    return _result(test, None, version, ranks, rows, average, out_of_bounds, errors, cut, unvalidated)


def _false(value) -> bool:
    return value is False or value == "false"


def _nwrong_absent(result: dict) -> bool:
    return any(isinstance(result.get(key), dict) and result[key].get("nwrong") is None
               for key in ("out_of_place", "in_place"))


def _document_rank(device: dict) -> dict:
    return {"rank": device.get("rank"), "group": device.get("group"), "pid": device.get("pid"),
            "host": device.get("hostname"), "device": device.get("device"),
            "bus_id": device.get("device_hex") or None, "name": device.get("device_info") or None}


def _document_row(result: dict) -> dict:
    root = str(result.get("root", "")).strip()
    redop = result.get("redop")
    return {
        "size_bytes": result.get("size"),
        "count": result.get("count"),
        "type": result.get("type"),
        "redop": None if redop in (None, "", "none") else redop,
        "root": int(root) if re.match(r"^\d+$", root) else None,
        "out_of_place": _document_block(result.get("out_of_place")),
        "in_place": _document_block(result.get("in_place")),
    }


def _document_block(block):
    if not isinstance(block, dict):
        return None
    nwrong = block.get("nwrong")
    return {
        "time_us": _number(block.get("time", block.get("cpu_time"))),
        "algbw_gbs": _number(block.get("alg_bw")),
        "busbw_gbs": _number(block.get("bus_bw")),
        "wrong": int(nwrong) if isinstance(nwrong, (int, float)) else None,
    }


def _number(value):
    return float(value) if isinstance(value, (int, float)) else None
