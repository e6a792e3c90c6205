# -*- coding: utf-8 -*-
"""NVIDIA nccl-tests results: the text table every *_perf binary prints, or the document its `-J file.json` writes."""

from __future__ import annotations

import os
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing

TOOL = "nccl-tests"
# `mpirun --tag-output` puts "[job,rank]<stdout>:" before every line a rank prints.
_TAG = re.compile(r"^\[[0-9]+,[0-9]+\]<std(?:out|err)>:")
# Since nccl-tests 2.17.4 (October 2025); builds from a git checkout add "(commit)" after the version.
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)(?: \([0-9a-f]+\))? nccl-headers=([0-9]+) nccl-library=([0-9]{1,9})")
_STARTING = re.compile(r"^#\s*Collective test (?:starting|concluded): (\S+)")
# The run's parameters; a paste through Markdown can lose the leading "#".
_PARAMS = re.compile(r"^#?\s*nThread [0-9]+ nGpus [0-9]+ minBytes [0-9]+ maxBytes [0-9]+")
# "#   Rank  0 on host device 0 [0x1a] name" (2018), "... Pid 12 on ..." (2019), "#  Rank  0 Group  0 Pid ..." (2022),
# with the PCI address "[0000:1a:00]" since 2.16 (2025).
_RANK = re.compile(r"^#?\s*Rank\s+([0-9]+)(?:\s+Group\s+([0-9]+))?(?:\s+Pid\s+([0-9]+))?\s+on\s+(\S+)\s+device\s+([0-9]+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_COLUMNS = re.compile(r"^#\s+size\s+count\s+type\b")
_OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\S+)\s*(\w*)")
_AVERAGE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
_ROW_START = re.compile(r"^\s*[0-9]+\s+[0-9]+\s")
# Lines that say a rank failed: nccl-tests' own checks (common.cu) and NCCL's warnings.
# "# error:" is the last error NCCL recorded, printed at the end of a run since 2.17.3.
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|NCCL WARN|Invalid number of GPUs|^#\s*error: ")
# NCCL_DEBUG=VERSION (or INFO) prints the library's version; the table header has it only since 2.17.4.
_NCCL_VERSION = re.compile(r"(?:^|NCCL INFO )NCCL version ([0-9]+\.[0-9]+\.[0-9]+)")
# A shell prompt or launcher line names the binary: ./build/all_reduce_perf, all_reduce_perf_mpi.
_BINARY = re.compile(r"(?:^|[/\s])([a-z_]+_perf(?:_mpi)?)(?=\s|$)")
# The most bus bandwidth a row can hold, in GB/s. The fastest link a GPU has, NVLink5, carries 900 GB/s per direction
# (1.8 TB/s both ways); a figure above 100 TB/s is no measurement of any link built, but a garbled or forged cell.
MAX_BUSBW_GBS = 100_000.0


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.21.5": X*10000+Y*100+Z since NCCL 2.9, X*1000+Y*100+Z before."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def parse_nccl_tests(text: str) -> dict:
    """The ranks, the result rows and the summary of an nccl-tests run, with a status that says whether the run was
    whole and clean ("ok"), cut short ("incomplete") or reported a failure ("failed"); `problems` says why it is not ok.
    A value no run measures (a negative, non-finite or impossibly large bandwidth, an endless number) fails the run
    with the line it is on. Output that is not nccl-tests' (nothing of its header, rows or summary, nor a failure it
    reports), or that holds several runs, raises ParseError."""
    text = parsing.bounded(TOOL, text)
    if not text.strip():
        raise parsing.fail(TOOL, "no output", text)
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


class _Once:
    """The lines a run prints once; a second one means several runs in one output, whose rows must not be merged
    into one result (a 16 GiB row from each would read as one run that measured 16 GiB twice)."""

    def __init__(self, text: str):
        self.text = text
        self.seen: dict = {}

    def see(self, what, number: int, row: bool = False) -> None:
        first = self.seen.setdefault(what, number)
        # A row of 0 bytes may repeat the row right above it: a sweep from below one element (-b 1) rounds its first
        # sizes down to 0 bytes.
        if first != number and not (row and what[0] == 0 and self.seen.get("last row") == what):
            name = what if isinstance(what, str) else "row of {} bytes, {}".format(what[0], what[1] or "no type")
            raise parsing.fail(TOOL, f"several runs in one output: a second {name} at line {number + 1} (the first at "
                                     f"line {first + 1}); give each run's output on its own", self.text)
        if row:
            self.seen["last row"] = what


def _parse_table(text: str) -> dict:
    test = tests_version = version = average = out_of_bounds = columns = None
    params = False
    ranks, rows, errors, cut = [], [], [], []
    unvalidated = 0
    once = _Once(text)
    lines = [_TAG.sub("", line.rstrip("\r")) for line in text.splitlines()]
    for number, line in enumerate(lines):
        last = number == len(lines) - 1
        try:
            match = _VERSION.match(line)
            if match:
                once.see("nccl-tests version line", number)
                tests_version, version = match.group(1), nccl_version(int(match.group(3)))
                continue
            match = _STARTING.match(line)
            if match:
                test = test or _test_name(match.group(1))
                continue
            if _PARAMS.match(line):
                once.see("parameter line (\"# nThread ...\")", number)
                params = True
                continue
            match = _RANK.match(line)
            if match:
                ranks.append(_rank(match))
                continue
            if _COLUMNS.match(line):
                once.see("result table header", number)
                columns = _columns(line, text)
                continue
            match = _OUT_OF_BOUNDS.match(line)
            if match:
                out_of_bounds = parsing.count(match.group(1), "the out-of-bounds count")
                if match.group(2) == "FAILED" or out_of_bounds:
                    errors.append(line.strip())
                continue
            match = _AVERAGE.match(line)
            if match:
                once.see("\"# Avg bus bandwidth\" summary", number)
                average = parsing.decimal(match.group(1), "the average bus bandwidth")
                if average is None:
                    errors.append(f"the average bus bandwidth is not a number: {line.strip()!r}")
                    continue
                average = parsing.measure(average, "the average bus bandwidth", MAX_BUSBW_GBS)
                if match.group(2) == "FAILED":
                    errors.append(line.strip())
                continue
            if _FAILURE.search(line):
                # A rank that fails while a row is printed glues its failure to the row's start.
                errors.append(line.strip())
                continue
            if _ROW_START.match(line) and (columns is not None or _TYPED_ROW.match(line)):
                read = _row(line, columns or _LAYOUT)
                if read is None:
                    cut.append(f"a result row is cut short or garbled: {parsing.excerpt(line)}"
                               if last else f"a result row could not be read: {parsing.excerpt(line)}")
                    continue
                row, checked = read
                once.see((row["size_bytes"], row["type"], row["redop"], row["root"]), number, row=True)
                rows.append(row)
                unvalidated += not checked
                for block in ("out_of_place", "in_place"):
                    wrong = (row[block] or {}).get("wrong")
                    if wrong:
                        errors.append(f"{wrong} wrong elements {block.replace('_', '-')} at {row['size_bytes']} "
                                      f"bytes: {line.strip()!r}")
                continue
        except parsing.BadValue as error:
            errors.append(f"line {number + 1}: {error}: {parsing.excerpt(line)}")
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
_TYPED_ROW = re.compile(r"^\s*[0-9]+\s+[0-9]+\s+(?:u?int(?:8|32|64)|half|float|double|bfloat16|f8e4m3|f8e5m2|char|int)\s")
_LAYOUT = {"operation": ["size", "count", "type", "redop", "root"], "width": 8,
           "blocks": [(0, ["time", "algbw", "busbw", "#wrong"]), (4, ["time", "algbw", "busbw", "#wrong"])]}


def _rank(match) -> dict:
    bus_id = match.group(6).strip() or None
    return {
        "rank": parsing.count(match.group(1), "the rank"),
        "group": parsing.count(match.group(2), "the group") if match.group(2) is not None else None,
        "pid": parsing.count(match.group(3), "the pid") if match.group(3) is not None else None,
        "host": match.group(4),
        "device": parsing.count(match.group(5), "the device"),
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
    row; ParseError for a row that holds a value no run measures. In-place alone may be N/A in a checked run:
    nccl-tests checks no in-place alltoall (src/alltoall.cu, 2.17.6)."""
    tokens = line.split()
    width = columns["width"]
    if len(tokens) < width + 3:
        return None
    head, measured = tokens[:-width], tokens[-width:]
    # Its first two cells are digits (_ROW_START); parsing.count refuses more of them than any size has.
    if len(head) > len(columns["operation"]):
        return None
    # An operation without a reduction (alltoall before 2.13) leaves the redop cell empty: the cells it has are
    # named by what they hold, a root being a number.
    redop = root = None
    for cell in head[3:]:
        if re.match(r"^-?[0-9]+$", cell):
            root = None if cell.startswith("-") else parsing.count(cell, "the root")
        else:
            redop = None if cell == "none" else cell
    row = {"size_bytes": parsing.count(head[0], "the size"), "count": parsing.count(head[1], "the count"),
           "type": head[2], "redop": redop, "root": root}
    checked = False
    for key, (start, names) in zip(("out_of_place", "in_place"), columns["blocks"]):
        block = _block(measured[start:start + 4], names, key.replace("_", "-"))
        if block is None:
            return None
        row[key] = block
        if key == "out_of_place":
            checked = measured[start + 3] != "N/A"
    return row, checked


def _block(cells: list, names: list, where: str):
    """One of a row's two measured blocks: time, algbw, busbw and the wrong elements, which the header calls "#wrong"
    since 2.13 (a count, printed "%g" and so "1.04858e+06" when large) and "error" before (the largest deviation).
    Per-iteration reports (-I) add four columns after them, which are not read."""
    if len(cells) < 4 or len(names) < 4:
        return None
    time, algbw, busbw, wrong = (parsing.decimal(cell, f"the {where} {name}") for cell, name in zip(cells, names))
    if time is None or algbw is None or busbw is None or (cells[3] != "N/A" and wrong is None):
        return None
    # A deviation (before 2.13) is judged by the out-of-bounds count, not here.
    counted = names[3] == "#wrong" and wrong is not None
    return _measured({"time_us": time, "algbw_gbs": algbw, "busbw_gbs": busbw,
                      "wrong": int(parsing.measure(wrong, f"the {where} #wrong")) if counted else None}, where)


def _measured(block: dict, where: str) -> dict:
    """A block whose values a run can have measured (not negative, finite, the bus bandwidth below MAX_BUSBW_GBS);
    ParseError naming the value otherwise. The algorithm bandwidth has no bound: one rank's in-place collective copies
    nothing and reads as terabytes per second."""
    for key, name, most in (("time_us", "time", None), ("algbw_gbs", "algbw", None),
                            ("busbw_gbs", "busbw", MAX_BUSBW_GBS)):
        if block[key] is not None:
            parsing.measure(block[key], f"the {where} {name}", most)
    return block


# The JSON document (-J, nccl-tests 2.17.3 and later; src/util.cu). Booleans are written as the strings "true" and
# "false", NaN as "nan", and before 2.17.9 the average was spelt "average_bus_bandwidith" / "bandwidith".
_AVERAGE_KEYS = (("average_bus_bandwidth", "bandwidth"), ("average_bus_bandwidith", "bandwidith"))
# What json.loads gives for a JSON number.
_NUMBER = (int, float)


def _typed(value, path: str, kind):
    return parsing.json_typed(TOOL, value, path, kind)


def _parse_document(text: str) -> dict:
    document = parsing.load_json(TOOL, text)
    if not isinstance(document, dict) or ("config" not in document and "results" not in document):
        raise parsing.fail(TOOL, "a JSON document without nccl-tests' \"config\" or \"results\"", text)
    errors, cut = [], []
    args = _typed(document.get("args"), "args", list) or []
    test = _test_name(os.path.basename(args[0])) if args and isinstance(args[0], str) else None
    code = _count(document.get("nccl_version"), "nccl_version")
    version = nccl_version(code) if code else None
    config = _typed(document.get("config"), "config", dict)
    devices = _typed((config or {}).get("devices"), "config.devices", list) or []
    ranks = [_document_rank(device, f"config.devices[{index}]") for index, device in enumerate(devices)]
    rows = []
    unvalidated = 0
    for index, result in enumerate(_typed(document.get("results"), "results", list) or []):
        path = f"results[{index}]"
        row = _document_row(_typed(result, path, dict) or {}, path)
        try:
            for block in ("out_of_place", "in_place"):
                if row[block] is not None:
                    _measured(row[block], f"{path}.{block}")
        except parsing.BadValue as error:
            errors.append(str(error))
            continue
        for block in ("out_of_place", "in_place"):
            wrong = (row[block] or {}).get("wrong")
            if wrong:
                errors.append(f"{wrong} wrong elements {block.replace('_', '-')} at {row['size_bytes']} bytes")
        rows.append(row)
        unvalidated += any(row[block] is not None and row[block]["wrong"] is None for block in ("out_of_place", "in_place"))
    bounds = _typed(document.get("out_of_bounds"), "out_of_bounds", dict)
    out_of_bounds = _wrong((bounds or {}).get("count"), "out_of_bounds.count")
    if bounds is not None and (out_of_bounds or _false(bounds.get("okay"))):
        errors.append(f"out of bounds values: {out_of_bounds}")
    average = None
    for key, field in _AVERAGE_KEYS:
        summary = _typed(document.get(key), key, dict)
        if summary is not None:
            average = _value(summary.get(field), f"{key}.{field}")
            try:
                average = None if average is None else parsing.measure(average, f"{key}.{field}", MAX_BUSBW_GBS)
            except parsing.BadValue as error:
                errors.append(str(error))
                average = None
            if _false(summary.get("okay")):
                errors.append(f"the average bus bandwidth {average} is below the one asked for")
    # A clean run writes [""]: ncclGetLastError's empty string.
    errors.extend(str(error) for error in _typed(document.get("errors"), "errors", list) or []
                  if str(error).strip())
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


def _document_rank(device, path: str) -> dict:
    device = _typed(device, path, dict) or {}
    numbers = {key: _count(device.get(name), f"{path}.{name}")
               for key, name in (("rank", "rank"), ("group", "group"), ("pid", "pid"), ("device", "device"))}
    texts = {key: _typed(device.get(name), f"{path}.{name}", str)
             for key, name in (("host", "hostname"), ("bus_id", "device_hex"), ("name", "device_info"))}
    return {"rank": numbers["rank"], "group": numbers["group"], "pid": numbers["pid"], "host": texts["host"],
            "device": numbers["device"], "bus_id": texts["bus_id"] or None, "name": texts["name"] or None}


def _document_row(result: dict, path: str) -> dict:
    root = _typed(result.get("root"), f"{path}.root", (str, int))
    root = "" if root is None else str(root).strip()
    redop = _typed(result.get("redop"), f"{path}.redop", str)
    return {
        "size_bytes": _count(result.get("size"), f"{path}.size"),
        "count": _count(result.get("count"), f"{path}.count"),
        "type": _typed(result.get("type"), f"{path}.type", str),
        "redop": None if redop in (None, "", "none") else redop,
        "root": parsing.count(root, f"{path}.root") if re.match(r"^[0-9]+$", root) else None,
        "out_of_place": _document_block(result.get("out_of_place"), f"{path}.out_of_place"),
        "in_place": _document_block(result.get("in_place"), f"{path}.in_place"),
    }


def _document_block(block, path: str):
    block = _typed(block, path, dict)
    if block is None:
        return None
    time = "time" if "time" in block else "cpu_time"
    return {
        "time_us": _value(block.get(time), f"{path}.{time}"),
        "algbw_gbs": _value(block.get("alg_bw"), f"{path}.alg_bw"),
        "busbw_gbs": _value(block.get("bus_bw"), f"{path}.bus_bw"),
        "wrong": _wrong(block.get("nwrong"), f"{path}.nwrong"),
    }


def _value(value, path: str):
    """A measured value: a number, or None where the document writes "nan" or nothing."""
    return None if value == "nan" else _typed(value, path, _NUMBER)


def _count(value, path: str):
    """A count the document holds as a number (rank, size, pid); None where absent."""
    value = _typed(value, path, _NUMBER)
    if value is None:
        return None
    parsing.measure(value, f"{TOOL}: the document's {path}")
    if isinstance(value, float) and not value.is_integer():
        raise parsing.ParseError(f"{TOOL}: the document's {path} is {value}, not a whole number")
    return int(value)


def _wrong(value, path: str):
    """Wrong elements or out-of-bounds values, a count written as a double; None where not checked."""
    if value is None:
        return None
    return int(parsing.measure(_typed(value, path, _NUMBER), f"{TOOL}: the document's {path}"))
