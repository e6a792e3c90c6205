"""`make help` names every public target of the Makefile."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# Steps other targets run, not meant to be called alone; and help, the list itself.
INTERNAL = {"apiserver-deps", "help"}


def test_make_help_lists_every_public_target():
    phony = re.search(r"^\.PHONY:(.*)$", (PROJECT / "Makefile").read_text(), re.MULTILINE).group(1).split()
    shown = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=PROJECT, capture_output=True,
                           text=True, check=True).stdout
    named = set(re.findall(r"\bmake ([a-z0-9-]+)", shown))
    missing = sorted(set(phony) - INTERNAL - named)
    assert missing == [], f"make help does not mention {missing}"
