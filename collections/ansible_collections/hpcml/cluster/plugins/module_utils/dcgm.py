# -*- coding: utf-8 -*-
"""What `dcgmi diag -r <level>` reported: its text table or its JSON (`-j`), from DCGM 2.x to 4.x.

The shapes follow NVIDIA/DCGM dcgmi/Diag.cpp (v3.3.9 and v4.6.0): a 78-column table whose messages are cut into
45-character pieces, "Pass - All" / "Fail - GPU: 1" per test up to 3.x and "GPU0: Pass" rows from 4.0 on; the JSON
under "DCGM GPU Diagnostic" (up to 3.x, one result per GPU) or "DCGM Diagnostic" (4.x, with "test_summary",
"entity_groups" and "metadata").
"""

from __future__ import annotations

import json
import re

from ansible_collections.hpcml.cluster.plugins.module_utils import parsing

TOOL = "dcgmi diag"

RESULTS = ("pass", "fail", "warn", "skip", "not run")
# The worst result of a test decides it; a test that some GPUs skipped was not a whole pass.
_RANK = {"pass": 0, "skip": 1, "not run": 2, "warn": 3, "fail": 4}
# Each run level adds categories to the one below (DCGM user guide, "Run Levels and Tests"); dcgmi prints a
# category's heading even when its tests were skipped.
LEVEL_CATEGORIES = {
    1: ("Deployment",),
    2: ("Deployment", "Integration", "Hardware"),
    3: ("Deployment", "Integration", "Hardware", "Stress"),
    4: ("Deployment", "Integration", "Hardware", "Stress"),
}

_HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|$")
_DOUBLE_RULE = re.compile(r"^\+=+\+=+\+$")
_BORDER = re.compile(r"^\+-+\+-+\+$")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>\S.*?)\s+-+\+-+[|+]$")
_ROW = re.compile(r"^\|(?P<name>.*?)\|(?P<value>.*)\|$")
# The last row of a paste that stopped in the middle of the line.
_OPEN_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>[^|]*)$")
# Up to 3.x: "Pass", "Pass - All", "Fail - GPU: 1", "Pass - GPUs: 0, 2, 3".
# GPU ids are ASCII and bounded (parsing.MAX_DIGITS): '²' or 5000 digits are no GPU, and no int() can read them.
_GROUP = re.compile(r"^(?P<result>Pass|Fail|Warn|Skip|Not Run)(?: - (?:All|GPUs?: (?P<ids>[0-9]{1,20}(?:, *[0-9]{1,20})*)))?$")
# From 4.0: "GPU0: Pass" under the test's row.
_ENTITY = re.compile(r"^(?P<group>[A-Za-z_]+)(?P<id>[0-9]{1,20}): (?P<result>Pass|Fail|Warn|Skip|Not Run)$")
_MESSAGE = re.compile(r"^(?P<kind>Warning|Error|Info)(?:: (?P<group>[A-Za-z_]+)(?P<id>[0-9]{1,20}))?$")
_LEVEL = re.compile(r"dcgmi\s+diag\b.*?(?:-r|--run)[ =]?(?P<level>[1-4])\b")
# Where dcgmi wraps a message: the result column holds 45 characters of it from column 30 on.
_CHUNK_START, _CHUNK = 30, 45


def _result(word: str) -> str:
    result = word.strip().lower()
    if result not in RESULTS:
        raise parsing.ParseError(f"{TOOL}: the result {word!r} is none of Pass, Fail, Warn, Skip, Not Run")
    return result


def _worst(results) -> str | None:
    results = list(results)
    return max(results, key=_RANK.__getitem__) if results else None


def _new_report(fmt: str, level: int | None) -> dict:
    return {"status": "pass", "format": fmt, "dcgm_version": None, "driver_version": None, "level": level,
            "gpus": [], "tests": [], "errors": [], "problems": []}


def _new_test(name: str, category: str | None) -> dict:
    return {"name": name, "category": category, "result": None, "gpus": {}, "messages": []}


def _stray_lines(lines, report: dict, warnings: list) -> None:
    """Lines dcgmi printed around the table or document: its own errors, or warnings of the engine."""
    for line in lines:
        text = line.strip()
        if re.match(r"^Error\b", text):
            report["errors"].append(text)
        elif re.match(r"^WARNING\b", text, re.IGNORECASE):
            warnings.append(f"dcgmi printed {text!r} outside its results")


# ---------------------------------------------------------------------------------------------------- text table

def _tables(lines) -> list:
    """(start, limit) line spans of each result table: from its heading row up to the next table's or the end."""
    starts = [index for index, line in enumerate(lines) if _HEADER.match(line.strip())]
    spans = []
    for number, start in enumerate(starts):
        limit = starts[number + 1] if number + 1 < len(starts) else len(lines)
        spans.append((start, limit))
    if not starts:
        # A table whose top was cut off starts at its first row.
        first = next((index for index, line in enumerate(lines) if _ROW.match(line.strip())
                      or _SECTION.match(line.strip())), None)
        if first is not None:
            spans.append((first, len(lines)))
    return spans


def _read_table(lines, headed: bool) -> dict:
    """The tests, metadata and shape problems of one table (lines from its heading row on)."""
    table = {"tests": [], "metadata": {}, "closed": False, "headed": headed, "interrupted": None, "categories": [],
             "end": len(lines), "open_row": None, "orphans": []}
    category = None
    test = None
    message = None
    for index, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        if index == 0 and headed:
            continue
        if _DOUBLE_RULE.match(stripped):
            continue
        if _BORDER.match(stripped):
            if table["tests"] or table["metadata"] or table["categories"]:
                table["closed"] = True
                table["end"] = index + 1
                break
            continue
        section = _SECTION.match(stripped)
        if section:
            category = section.group("name")
            table["categories"].append(category)
            test = message = None
            continue
        row = _ROW.match(stripped)
        if not row and _OPEN_ROW.match(stripped):
            row = _OPEN_ROW.match(stripped)
            table["open_row"] = stripped
        if not row:
            table["interrupted"] = stripped
            table["end"] = index
            break
        name = row.group("name").strip()
        value = row.group("value").strip()
        if not name and not value:
            continue
        if category == "Metadata":
            table["metadata"][name] = value
            continue
        kind = _MESSAGE.match(name)
        if category is None and not headed and test is None and not kind and not _GROUP.match(value):
            # The rest of a Metadata section whose heading was cut off with the table's top.
            continue
        if name and not kind:
            test = _new_test(name, category)
            table["tests"].append(test)
            message = None
            _apply_result(test, value, name)
            continue
        if kind:
            gpu = kind.group("id") if kind.group("group") == "GPU" else None
            message = {"kind": kind.group("kind"), "gpu": gpu, "chunks": [_chunk(line)]}
            # A message above every test (a paste that kept only it) still belongs to the run.
            (test["messages"] if test else table["orphans"]).append(message)
            continue
        if test is None:
            if message is not None:
                message["chunks"].append(_chunk(line))
                continue
            table["interrupted"] = stripped
            table["end"] = index
            break
        if _GROUP.match(value) or _ENTITY.match(value):
            _apply_result(test, value, name)
            message = None
            continue
        if message is None:
            # 3.x prints the EUD return code under a "Warn - All" row without a heading of its own.
            message = {"kind": "Info", "gpu": None, "chunks": []}
            test["messages"].append(message)
        message["chunks"].append(_chunk(line))
    return table


def _chunk(line: str) -> str:
    row = line.strip()
    # Lines copied from a terminal may have lost the padding after the text: put it back before slicing.
    return row.ljust(_CHUNK_START + _CHUNK)[_CHUNK_START:_CHUNK_START + _CHUNK]


def _apply_result(test: dict, value: str, name: str) -> None:
    group = _GROUP.match(value)
    entity = _ENTITY.match(value)
    if group:
        result = _result(group.group("result"))
        ids = group.group("ids")
        for gpu in re.split(r",\s*", ids) if ids else ():
            test["gpus"][gpu] = result
        test["result"] = result if test["result"] is None else _worst((test["result"], result))
    elif entity:
        result = _result(entity.group("result"))
        if entity.group("group") == "GPU":
            test["gpus"][entity.group("id")] = result
        # The test's own row already holds the result of all entities together.
        if test["result"] is None:
            test["result"] = result
    else:
        raise parsing.ParseError(f"{TOOL}: test {name!r} has the result {value!r}, which is none of "
                                 f"Pass, Fail, Warn, Skip, Not Run")


def _finish_messages(messages: list) -> list:
    """Messages as text, each with what it is and the GPU it names."""
    out = []
    for message in messages:
        text = "".join(message["chunks"]).strip()
        prefix = message["kind"] + (f" (GPU {message['gpu']})" if message["gpu"] is not None else "")
        out.append((message["kind"], f"{prefix}: {text}"))
    return out


def _parse_text(text: str, level: int | None) -> dict:
    lines = text.splitlines()
    report = _new_report("text", level if level is not None else _command_level(text))
    warnings = []
    spans = _tables(lines)
    if not spans:
        _stray_lines(lines, report, warnings)
        if not report["errors"]:
            raise parsing.fail(TOOL, "no result table, no JSON document and no error from dcgmi", text)
        return _judge(report, warnings, [])

    tables = []
    outside = list(lines[:spans[0][0]])
    for start, limit in spans:
        headed = bool(_HEADER.match(lines[start].strip()))
        table = _read_table(lines[start:limit], headed)
        tables.append(table)
        outside.extend(lines[start + table["end"]:limit])
    _stray_lines(outside, report, warnings)

    first = tables[0]
    if len(tables) > 1:
        # srun can run one diagnostic per task; several tables that say the same are one result.
        shapes = {json.dumps([(t["name"], t["result"], t["gpus"]) for t in table["tests"]]) for table in tables}
        if len(shapes) > 1:
            raise parsing.fail(TOOL, f"{len(tables)} result tables that disagree (several runs in one output)", text)
    for kind, message in _finish_messages(first["orphans"]):
        if kind != "Info":
            report["errors"].append(message)
    if not first["tests"] and not report["errors"]:
        raise parsing.fail(TOOL, "a result table without a single test", text)

    incomplete = []
    if not first["headed"]:
        incomplete.append("the table has no heading row: the output's start is missing")
    if first["open_row"] is not None:
        incomplete.append(f"the table's last row breaks off in the middle: {first['open_row']!r}")
    if first["interrupted"] is not None:
        incomplete.append(f"the table breaks off at a line that is no table row: {first['interrupted']!r}")
    elif not first["closed"]:
        incomplete.append("the table has no closing border: the output was cut short")
    categories = first["categories"]
    if "Deployment" not in categories:
        incomplete.append("the table has no Deployment section, which every run level prints")
    wanted = LEVEL_CATEGORIES.get(report["level"], ())
    missing = [name for name in wanted if name not in categories]
    if missing:
        incomplete.append(f"level {report['level']} prints the sections {', '.join(wanted)}; "
                          f"missing: {', '.join(missing)}")

    metadata = first["metadata"]
    report["dcgm_version"] = metadata.get("DCGM Version") or None
    report["driver_version"] = metadata.get("Driver Version Detected") or None
    gpus = set()
    for test in first["tests"]:
        messages = _finish_messages(test["messages"])
        gpus.update(test["gpus"])
        report["tests"].append({"name": test["name"], "category": test["category"], "result": test["result"],
                                "gpus": dict(test["gpus"]), "messages": [text for kind, text in messages]})
        for kind, message in messages:
            if kind == "Info":
                continue
            if test["result"] == "fail" or kind == "Error":
                report["errors"].append(f"{test['name']}: {message}")
            else:
                warnings.append(f"{test['name']}: {message}")
    report["gpus"] = sorted(int(gpu) for gpu in gpus)
    return _judge(report, warnings, incomplete)


# ---------------------------------------------------------------------------------------------------- JSON

def _ids(value, path: str) -> list:
    """GPU ids as dcgmi writes them (a number, or "0, 2, 3"), each a count; ParseError naming the path otherwise."""
    if value is None:
        return []
    parts = [part.strip() for part in str(value).split(",") if part.strip()]
    for part in parts:
        if not parsing.is_count(part):
            raise parsing.ParseError(f"{TOOL}: the document's {path} holds {part[:40]!r}, not a GPU id")
    return [str(int(part)) for part in parts]


def _texts(value) -> list:
    """Warnings and info as dcgmi writes them: a string, a list of strings, or a list of {"warning": ...}."""
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [str(value)]
    if isinstance(value, dict):
        text = value.get("warning", value.get("message"))
        return [str(text)] if text is not None else [json.dumps(value, sort_keys=True)]
    return [text for item in value for text in _texts(item)]


def _typed(value, path: str, kind):
    return parsing.json_typed(TOOL, value, path, kind)


def _json_test(entry: dict, category: str | None, gpus: set, path: str) -> tuple:
    test = _new_test(str(entry.get("name")), category)
    warnings, infos, results = [], [], []
    for number, result in enumerate(_typed(entry.get("results"), f"{path}.results", list) or []):
        if not isinstance(result, dict):
            continue
        at = f"{path}.results[{number}]"
        status = _result(str(result.get("status", "")))
        results.append(status)
        if "entity_id" in result:
            ids = _ids(result["entity_id"], f"{at}.entity_id") if result.get("entity_group", "GPU") == "GPU" else []
        else:
            ids = _ids(result.get("gpu_ids", result.get("gpu_id")), f"{at}.gpu_ids")
        for gpu in ids:
            test["gpus"][gpu] = status
            gpus.add(gpu)
        where = f" (GPU {', '.join(ids)})" if ids else ""
        warnings.extend(f"Warning{where}: {text}" for text in _texts(result.get("warnings")))
        infos.extend(f"Info{where}: {text}" for text in _texts(result.get("info")))
    summary = _typed(entry.get("test_summary"), f"{path}.test_summary", dict)
    if summary and summary.get("status"):
        test["result"] = _result(str(summary["status"]))
        for text in _texts(summary.get("warnings")):
            if not any(seen.endswith(": " + text) for seen in warnings):
                warnings.append(f"Warning: {text}")
    else:
        test["result"] = _worst(results)
    if test["result"] is None:
        raise parsing.ParseError(f"{TOOL}: the JSON test {test['name']!r} carries no status")
    test["messages"] = warnings + infos
    return test, warnings


def _parse_json(document, text: str, report: dict, warnings: list) -> list:
    """Fills `report` from a loaded document; returns why it reads as incomplete."""
    if not isinstance(document, dict):
        raise parsing.fail(TOOL, "the JSON is not an object", text)
    if "iterations" in document:
        raise parsing.fail(TOOL, "JSON of a run with --iterations, which this parser does not read", text)
    key = next((name for name in ("DCGM Diagnostic", "DCGM GPU Diagnostic") if name in document), None)
    if key is None:
        raise parsing.fail(TOOL, 'the JSON has neither "DCGM Diagnostic" nor "DCGM GPU Diagnostic"', text)
    body = _typed(document[key], f'"{key}"', dict) or {}
    metadata = _typed(document.get("metadata"), "metadata", dict) or {}
    for field, name in (("dcgm_version", "version"), ("driver_version", "Driver Version Detected")):
        report[field] = (_typed(metadata.get(name), f'metadata."{name}"', str)
                         or _typed(body.get(name), f'"{key}"."{name}"', str) or None)
    if body.get("runtime_error"):
        report["errors"].append(f"runtime_error: {body['runtime_error']}")
    if body.get("Warning"):
        warnings.append(f"Warning: {body['Warning']}")

    gpus = set()
    for number, group in enumerate(_typed(document.get("entity_groups"), "entity_groups", list) or []):
        if isinstance(group, dict) and group.get("entity_group") == "GPU":
            path = f"entity_groups[{number}].entities"
            for index, entity in enumerate(_typed(group.get("entities"), path, list) or []):
                gpus.update(_ids((_typed(entity, f"{path}[{index}]", dict) or {}).get("entity_id"),
                                 f"{path}[{index}].entity_id"))
    categories = []
    for number, category in enumerate(_typed(body.get("test_categories"), f'"{key}".test_categories', list) or []):
        if not isinstance(category, dict):
            continue
        path = f'"{key}".test_categories[{number}]'
        name = _typed(category.get("category"), f"{path}.category", str)
        categories.append(name)
        # DCGM 3.1 wrote null between tests (its test array indexed by plugin); they hold nothing.
        for index, entry in enumerate(_typed(category.get("tests"), f"{path}.tests", list) or []):
            if not isinstance(entry, dict):
                continue
            test, test_warnings = _json_test(entry, name, gpus, f"{path}.tests[{index}]")
            report["tests"].append(test)
            target = report["errors"] if test["result"] == "fail" else warnings
            target.extend(f"{test['name']}: {message}" for message in test_warnings)
    if not report["tests"] and not report["errors"]:
        raise parsing.fail(TOOL, "a JSON document without a single test", text)
    report["gpus"] = sorted(int(gpu) for gpu in gpus)
    wanted = LEVEL_CATEGORIES.get(report["level"], ())
    missing = [name for name in wanted if name not in categories]
    if report["tests"] and missing:
        return [f"level {report['level']} runs the categories {', '.join(wanted)}; missing: {', '.join(missing)}"]
    return []


def _command_level(text: str) -> int | None:
    """The run level of a `dcgmi diag -r N` command line recorded with the output."""
    match = _LEVEL.search(text)
    return int(match.group("level")) if match else None


def _parse_json_text(text: str, level: int | None) -> dict:
    start = text.find("{")
    report = _new_report("json", level if level is not None else _command_level(text[:start]))
    warnings = []
    _stray_lines(text[:start].splitlines(), report, warnings)
    document_text = text[start:]
    try:
        document, end = parsing.decode_json(TOOL, document_text)
    except parsing.ParseError:
        raise
    except ValueError as error:
        depth, in_string = parsing.json_nesting(TOOL, document_text)
        # A document that ends inside an object, array or string: the output stopped early.
        if not (in_string or depth > 0):
            raise parsing.fail(TOOL, f"the JSON does not parse ({error})", text) from None
        # What the cut document still shows of a failure keeps the run from reading as merely unfinished.
        if re.search(r'"status"\s*:\s*"(?:Fail|FAIL)"', document_text):
            report["errors"].append("a test has the status Fail before the cut")
        return _judge(report, warnings, ["the JSON document ends before it closes: the output was cut short"])
    _stray_lines(document_text[end:].splitlines(), report, warnings)
    incomplete = _parse_json(document, text, report, warnings)
    return _judge(report, warnings, incomplete)


# ---------------------------------------------------------------------------------------------------- verdict

def _judge(report: dict, warnings: list, incomplete: list) -> dict:
    """Status from what the parse found: failure beats a cut, a cut beats a warning, and only the rest passes."""
    failed = [test["name"] for test in report["tests"] if test["result"] == "fail"]
    warned = [test["name"] for test in report["tests"] if test["result"] == "warn"]
    # A run whose every test past Deployment skipped (DCGM 3.0 without is_allowed, a GPU the plugins do not know)
    # checked no hardware: no pass, though nothing failed.
    beyond = [test["name"] for test in report["tests"] if test["category"] != "Deployment"]
    skipped = bool(beyond) and all(test["result"] in ("skip", "not run") for test in report["tests"]
                                   if test["category"] != "Deployment")
    problems = [f"failed: {', '.join(failed)}"] if failed else []
    problems.extend(report["errors"])
    problems.extend(incomplete)
    if warned:
        problems.append(f"warned: {', '.join(warned)}")
    if skipped:
        problems.append(f"every test past Deployment was skipped: {', '.join(beyond)}")
    problems.extend(warnings)
    report["problems"] = problems
    if failed or report["errors"]:
        report["status"] = "fail"
    elif incomplete:
        report["status"] = "incomplete"
    elif warned or warnings or skipped:
        report["status"] = "warn"
    else:
        report["status"] = "pass"
    return report


def parse_dcgmi_diag(output: str | dict, level: int | None = None) -> dict:
    """Status, versions, tests and per-GPU results of `dcgmi diag` output: the text table or the JSON of `-j`.

    `level` is the run level the caller asked for; without it the level is read from a `dcgmi diag -r N` command
    line in the output, where there is one. A level lets a run that stopped before its last category read as
    incomplete.
    """
    if isinstance(output, dict):
        parsing.json_depth(TOOL, output)
        try:
            text = json.dumps(output)
        except (TypeError, ValueError) as error:
            raise parsing.ParseError(f"{TOOL}: the document given is not JSON ({error})") from None
        report, warnings = _new_report("json", level), []
        # Read back as text would be: keys are strings, and nothing but JSON's types is left.
        incomplete = _parse_json(json.loads(text), text, report, warnings)
        return _judge(report, warnings, incomplete)
    if not isinstance(output, str):
        raise parsing.ParseError(f"{TOOL}: expected its output as text or loaded JSON, got {type(output).__name__}")
    text = parsing.strip_ansi(parsing.bounded(TOOL, output))
    if not text.strip():
        raise parsing.fail(TOOL, "empty", text)
    lines = [line.strip() for line in text.splitlines()]
    if any(_HEADER.match(line) or _SECTION.match(line) for line in lines):
        return _parse_text(text, level)
    if "{" in text and not any(_ROW.match(line) for line in lines):
        return _parse_json_text(text, level)
    return _parse_text(text, level)
