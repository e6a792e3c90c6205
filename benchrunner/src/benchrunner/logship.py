"""Result files carried in a log: each file as numbered base64 lines, short enough that ranks writing at once
through mpirun never split one, reassembled on the control host from the launcher pod's log."""

from __future__ import annotations

import base64
import re
import sys
from collections import defaultdict

MARKER = "BENCHRUNNER-RESULT"
# Well under PIPE_BUF (4096): one write, never interleaved with another rank's.
CHUNK = 600
_LINE = re.compile(rf"{MARKER} (?P<name>[A-Za-z0-9._-]+) (?P<index>\d+)/(?P<total>\d+) (?P<data>[A-Za-z0-9+/=]*)$")


def emit(name: str, text: str) -> None:
    data = base64.b64encode(text.encode()).decode()
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [""]
    for index, chunk in enumerate(chunks):
        sys.stdout.write(f"{MARKER} {name} {index + 1}/{len(chunks)} {chunk}\n")
        sys.stdout.flush()


def collect(log: str) -> dict[str, str]:
    """Every complete file found in the log, by name; raises ValueError for a file with chunks missing."""
    parts: dict[str, dict[int, str]] = defaultdict(dict)
    totals: dict[str, int] = {}
    for line in log.splitlines():
        # mpirun may prefix lines (--tag-output); the marker starts the part that matters.
        match = _LINE.search(line.strip())
        if match:
            parts[match["name"]][int(match["index"])] = match["data"]
            totals[match["name"]] = int(match["total"])
    files = {}
    for name, chunks in parts.items():
        missing = sorted(set(range(1, totals[name] + 1)) - set(chunks))
        if missing:
            raise ValueError(f"{name}: parts {missing} of {totals[name]} are not in the log")
        files[name] = base64.b64decode("".join(chunks[i] for i in range(1, totals[name] + 1))).decode()
    return files
