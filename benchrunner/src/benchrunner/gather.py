"""A run's files brought from its nodes to the control host in one message per node.

Each node of the job answers one shell command of the benchmark play (roles/benchrunner/tasks/run.yml: no Python
needed there) with its rank results, the watchdog's record where it ended the job as stalled, and, on the launcher's
host, what the launcher left: a file's path in the run's
folder on one line, its bytes in base64 on the next. The control host writes them into the run's folder, accepting
only the names a run's nodes may send.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from benchrunner import results, watchdog

RUN_FILE = re.compile(rf"raw/(rank-[0-9]+|allreduce)\.json|{re.escape(watchdog.STALLED_JSON)}")


def parse(host: str, text: str, leaves: tuple[str, ...]) -> dict[str, str]:
    """One node's answer as {path in the run's folder: text}; anything else than what a node may send is an error
    naming the host and the line."""
    lines = text.splitlines()
    if len(lines) % 2:
        raise ValueError(f"{host}: a file name without its content in what the node sent ({lines[-1]!r})")
    files = {}
    for name, encoded in zip(lines[::2], lines[1::2]):
        if not RUN_FILE.fullmatch(name) and name not in leaves:
            raise ValueError(f"{host}: sent {name!r}, which is neither a rank's result, the watchdog's "
                             f"{watchdog.STALLED_JSON} nor one of {list(leaves)}")
        try:
            files[name] = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError(f"{host}: {name}: not base64 of UTF-8 text ({exc})") from exc
    return files


def write(run_dir: Path, answers: dict[str, str], leaves: tuple[str, ...], *, require_leaves: bool) -> list[str]:
    """Every node's files written into run_dir (atomically); the paths written. A file two nodes both sent must be
    the same; with require_leaves, a leaf no node sent is an error (the launch succeeded, so it left them)."""
    gathered: dict[str, tuple[str, str]] = {}
    for host, text in sorted(answers.items()):
        for name, content in parse(host, text, leaves).items():
            if name in gathered and gathered[name][1] != content:
                raise ValueError(f"{name}: {gathered[name][0]} and {host} sent different files")
            gathered[name] = (host, content)
    missing = [leaf for leaf in leaves if leaf not in gathered]
    if require_leaves and missing:
        raise ValueError(f"the launcher's host sent no {', '.join(missing)}, which the launcher leaves")
    for name, (_, content) in sorted(gathered.items()):
        results.write_atomic(run_dir / name, content)
    return sorted(gathered)
