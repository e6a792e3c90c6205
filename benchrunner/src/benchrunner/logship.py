"""Result files carried in the launcher pod's log, reassembled and verified on the control host.

The path is lossy: orted forwards each rank's output in reads of up to 4,096 bytes, so a line can be cut anywhere
and another rank's output written between its halves, and kubelet rotates the log (the API serves only the current
file). So each file travels as framed records (marker, name, part i/n, the whole file's SHA-256, a base64 chunk,
a CRC-32 of the record), and the launcher's mpirun tags every forwarded read with its rank (--tag-output:
`[job,rank]<stdout>:` at the start of each read and of each line in it). collect() splits the log at those tags,
joins each rank's pieces in order (restoring its own output whatever the cuts), and keeps a record only if its
CRC matches and a file only if every part arrived and its SHA-256 matches; anything else is reported, never parsed.
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import zlib
from collections import defaultdict
from dataclasses import dataclass, field

MARKER = "BENCHRUNNER-RESULT:2"
# Base64 per record: records of a few hundred bytes lose little when one is cut by rotation.
CHUNK = 600
# Open MPI's output tag (orte/mca/iof/base/iof_base_output.c in 4.1; PRRTE's in 5.x adds a space).
_TAG = re.compile(r"(?P<source>\[\d+,\d+\]<(?:stdout|stderr)>): ?")
_RECORD = re.compile(rf"{MARKER}:(?P<body>(?P<name>[A-Za-z0-9._-]+):(?P<index>\d+)/(?P<total>\d+):"
                     r"(?P<sha>[0-9a-f]{64}):(?P<data>[A-Za-z0-9+/=]*)):(?P<crc>[0-9a-f]{8})$")


def _crc(text: str) -> str:
    return f"{zlib.crc32(text.encode()):08x}"


def records(name: str, text: str) -> list[str]:
    """The lines that carry one file."""
    data = base64.b64encode(text.encode()).decode()
    digest = hashlib.sha256(text.encode()).hexdigest()
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [""]
    bodies = [f"{name}:{index}/{len(chunks)}:{digest}:{chunk}" for index, chunk in enumerate(chunks, 1)]
    return [f"{MARKER}:{body}:{_crc(body)}\n" for body in bodies]


def emit(name: str, text: str) -> None:
    for line in records(name, text):
        sys.stdout.write(line)
    sys.stdout.flush()


def streams(log: str) -> dict[str | None, str]:
    """Each rank's own stdout and stderr, from a log of tagged pieces (None: what came untagged, e.g. a log without
    tags)."""
    pieces: dict[str | None, list[str]] = defaultdict(list)
    source: str | None = None
    position = 0
    for tag in _TAG.finditer(log):
        pieces[source].append(log[position:tag.start()])
        source, position = tag["source"], tag.end()
    pieces[source].append(log[position:])
    return {key: "".join(parts) for key, parts in pieces.items()}


@dataclass
class Collected:
    files: dict[str, str] = field(default_factory=dict)
    # File name -> why it is not in files (parts missing, a checksum that did not match).
    incomplete: dict[str, str] = field(default_factory=dict)
    # Records cut or mixed beyond repair (their CRC failed); the files they belonged to are incomplete.
    damaged: int = 0


def collect(log: str) -> Collected:
    """Every file whose every part arrived intact; the others named with what went wrong."""
    parts: dict[str, dict[int, str]] = defaultdict(dict)
    totals: dict[str, set[int]] = defaultdict(set)
    digests: dict[str, set[str]] = defaultdict(set)
    collected = Collected()
    for text in streams(log).values():
        for line in text.splitlines():
            start = line.find(MARKER)
            if start < 0:
                continue
            match = _RECORD.match(line[start:])
            if not match or _crc(match["body"]) != match["crc"]:
                collected.damaged += 1
                continue
            parts[match["name"]][int(match["index"])] = match["data"]
            totals[match["name"]].add(int(match["total"]))
            digests[match["name"]].add(match["sha"])
    for name, chunks in sorted(parts.items()):
        if len(totals[name]) > 1 or len(digests[name]) > 1:
            collected.incomplete[name] = "records of different versions of the file"
            continue
        total = totals[name].pop()
        missing = sorted(set(range(1, total + 1)) - set(chunks))
        if missing:
            collected.incomplete[name] = f"parts {missing} of {total} are not in the log"
            continue
        data = base64.b64decode("".join(chunks[i] for i in range(1, total + 1)))
        if hashlib.sha256(data).hexdigest() != digests[name].pop():
            collected.incomplete[name] = "reassembled, its SHA-256 does not match"
            continue
        collected.files[name] = data.decode()
    return collected
