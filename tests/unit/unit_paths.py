"""Where the unit tests find the project and their recorded tool output, and the Makefile's targets."""

import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def make_targets() -> set[str]:
    """The names of the Makefile's rules, a pattern rule's with its `%` (`molecule-%`); no file targets."""
    return set(re.findall(r"^([a-z][a-z0-9%-]*):(?!=)", (PROJECT / "Makefile").read_text(), re.MULTILINE))
