"""`make help` names every target of the Makefile."""

from __future__ import annotations

import re
import subprocess

from unit_paths import PROJECT, make_targets


def test_make_help_lists_every_target():
    phony = re.search(r"^\.PHONY:(.*)$", (PROJECT / "Makefile").read_text(), re.MULTILINE).group(1).split()
    targets = (make_targets() | set(phony)) - {"help"}
    assert {"demo", "test", "apiserver-deps", "molecule-%"} <= targets
    shown = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=PROJECT, capture_output=True,
                           text=True, check=True).stdout
    # A pattern rule is named with a placeholder: make molecule-<scenario>.
    missing = sorted(t for t in targets
                     if not re.search(rf"\bmake {re.escape(t).replace('%', '<[a-z]+>')}(?![\w-])", shown))
    assert missing == [], f"make help does not mention {missing}"
