# -*- coding: utf-8 -*-
"""What every parser of tool output shares: a loud error when the output holds nothing it can read, and the guards
that keep hostile output (Unicode or endless digits, values no hardware measures, JSON nested or sized beyond any
run's) from escaping a parser as anything but a ParseError."""

from __future__ import annotations

import json
import math
import re

# nvidia-smi underlines the `topo -m` header with these when it writes to a terminal (and some drivers always do).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The most a tool's output may hold. The largest recorded output is 75 kB (`nvidia-smi -q -x` of one GPU, so ~600 kB
# for eight); nccl-tests over 1440 GPUs prints one ~100-character rank line each. 16 MiB is far above any run's.
MAX_OUTPUT_CHARS = 16 * 1024 * 1024
# nccl-tests' -J document nests 4 deep and dcgmi's -j 8 (objects and arrays, to a test result's fields; 10 to the
# objects of a warnings list); 64 is far beyond either and far below the recursion that json and the parsers' walks
# would run into.
MAX_JSON_DEPTH = 64
# The longest integer a tool here prints: a 64-bit counter has 20 digits. Python's int() refuses 4300 and more.
MAX_DIGITS = 20
# ASCII only: str.isdigit() and re's \d accept '²' or '٣', which int() refuses or reads as a number no tool prints.
_COUNT = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
# A decimal as C's printf writes it ("%7.2f", "%g"), at most 40 characters: "1e308" and a 5 MB run of digits are
# both read by float(), the second as infinity.
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")
_DECIMAL_CHARS = 40
# What can nest JSON, or hide a bracket inside a string.
_JSON_MARKS = re.compile(r'[][{}"\\]')


class ParseError(ValueError):
    """Output of a tool that a parser could not read; the message names the tool and shows the output's start."""


class BadValue(ParseError):
    """One value that no tool prints (count, decimal, measure): a parser that can read the rest names its line."""


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def excerpt(text: str, limit: int = 120) -> str:
    """The start of an output, escaped so that control characters show in the message."""
    head = text.strip()[:limit]
    return repr(head) + (" ..." if len(text.strip()) > limit else "")


def fail(tool: str, problem: str, text: str) -> ParseError:
    """A ParseError saying which tool's output could not be read, why, and how that output began."""
    if not text.strip():
        return ParseError(f"{tool} printed nothing")
    return ParseError(f"{tool}: {problem}; its output began {excerpt(text)}")


def exited(tool: str, rc: int, err: str, out: str, limit: int = 200) -> str:
    """Why a tool that exited non-zero gave nothing to parse: its status and the start of what it said."""
    said = (err or out).strip()
    return f"{tool} exited with {rc}: {said[:limit]}{' ...' if len(said) > limit else ''}"


def bounded(tool: str, text) -> str:
    """The output, once it is text of a size some run could print; ParseError otherwise."""
    if not isinstance(text, str):
        raise ParseError(f"{tool}: expected its output as text, got {type(text).__name__}")
    if len(text) > MAX_OUTPUT_CHARS:
        raise ParseError(f"{tool}: {len(text)} characters of output, more than the {MAX_OUTPUT_CHARS} any run prints")
    return text


def is_count(value) -> bool:
    """Whether a value is a count a tool prints: ASCII digits, at most MAX_DIGITS of them."""
    return isinstance(value, str) and _COUNT.fullmatch(value) is not None


def count(value, what: str) -> int:
    """The count a value holds (see is_count); ParseError naming `what` otherwise."""
    if not is_count(value):
        raise BadValue(f"{what} is {_short(value)}, not a count (ASCII digits, at most {MAX_DIGITS})")
    return int(value)


def decimal(value, what: str) -> float | None:
    """The number a cell holds as printf writes it, in ASCII; None for a cell that holds none. ParseError naming
    `what` for a number longer than 40 characters. The number may still be negative or too large for what it
    measures: see measure()."""
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return None
    if len(value) > _DECIMAL_CHARS:
        raise BadValue(f"{what} is a number of {len(value)} characters, longer than any tool prints")
    return float(value)


def measure(value, what: str, most: float | None = None) -> float:
    """A measured value that can be: a finite number (not a bool) from 0 up to `most`; ParseError naming `what`
    and the bound otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"{what} is {_short(value)}, not a number")
    if isinstance(value, int) and abs(value) >= 10 ** MAX_DIGITS:
        raise BadValue(f"{what} is an integer of more than {MAX_DIGITS} digits")
    if not math.isfinite(value) or value < 0:
        raise BadValue(f"{what} is {value}, not a finite number of 0 or more")
    if most is not None and value > most:
        raise BadValue(f"{what} is {value:g}, above {most:g}, which no hardware reaches")
    return float(value)


def json_nesting(tool: str, text: str) -> tuple[int, bool]:
    """How deep JSON text is still open at its end and whether it ends inside a string (a document cut short shows
    either). ParseError when the text is larger than MAX_OUTPUT_CHARS or nests deeper than MAX_JSON_DEPTH anywhere:
    beyond those no run's document goes, and json and the walks over what it loads would recurse without end."""
    bounded(tool, text)
    depth = 0
    in_string = False
    escaping = -2  # where the backslash is that makes the next character part of a string
    for mark in _JSON_MARKS.finditer(text):
        char, at = mark.group(), mark.start()
        if in_string:
            if at == escaping + 1:
                escaping = -2
            elif char == "\\":
                escaping = at
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                line = text.count("\n", 0, at) + 1
                raise ParseError(f"{tool}: the JSON nests deeper than {MAX_JSON_DEPTH} levels at line {line}, "
                                 "deeper than any run's document")
        elif char in "]}":
            depth -= 1
    return depth, in_string


def load_json(tool: str, text: str):
    """A whole JSON document within the bounds of json_nesting; ParseError for anything else, with json's reason."""
    json_nesting(tool, text)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise fail(tool, f"not a whole JSON document ({error})", text) from None


def decode_json(tool: str, text: str) -> tuple[object, int]:
    """The JSON document at the start of text and where it ends (text may follow it), within the bounds of
    json_nesting; json's ValueError when the document is no whole one, for the caller to tell cut from garbled."""
    json_nesting(tool, text)
    try:
        return json.JSONDecoder().raw_decode(text)
    except RecursionError:
        raise ParseError(f"{tool}: the JSON nests too deep to read") from None


def json_depth(tool: str, value) -> None:
    """ParseError when loaded JSON nests deeper than MAX_JSON_DEPTH (walked without recursion)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ParseError(f"{tool}: the JSON nests deeper than {MAX_JSON_DEPTH} levels, deeper than any run's")
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


# JSON's names for the types json.loads gives.
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


def json_typed(tool: str, value, path: str, kind):
    """A loaded document's value when it has the type (or one of the types) the tool writes at `path`, or is absent
    (null); ParseError naming the path and both types otherwise. A bool is no number, though Python counts it an int."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None or (isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))):
        return value
    wanted = " or ".join(dict.fromkeys(_JSON_TYPES.get(k, k.__name__) for k in kinds))
    raise ParseError(f"{tool}: the document's {path} is {_JSON_TYPES.get(type(value), type(value).__name__)}, "
                     f"not {wanted}")


def _short(value) -> str:
    """A value as a message shows it: repr, cut to 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:40]}... ({len(shown)} characters)"
