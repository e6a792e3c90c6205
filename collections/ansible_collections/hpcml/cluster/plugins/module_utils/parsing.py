# -*- coding: utf-8 -*-
"""What every parser of tool output shares: a loud error when the output holds nothing it can read."""

from __future__ import annotations

import re

# nvidia-smi underlines the `topo -m` header with these when it writes to a terminal (and some drivers always do).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ParseError(ValueError):
    """Output of a tool that a parser could not read; the message names the tool and shows the output's start."""


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
