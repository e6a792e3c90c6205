"""docs/contributing.md stays true (issue 35, item 3): every path it names exists (one with a placeholder such as
`<name>` matches at least one file today), every `make` target it names is the Makefile's, every molecule scenario
is one, every test it names is defined; and each of its checklists names files, tests and commands."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from unit_paths import PROJECT, make_targets

GUIDE = PROJECT / "docs" / "contributing.md"
KINDS = ("a framework", "a launcher", "a model", "an OS family", "a role")
PLACEHOLDER = re.compile(r"<[^<>/\s]+>")


def spans(text: str) -> list[str]:
    """What the text sets as code: `...`."""
    return re.findall(r"`([^`\n]+)`", text)


def paths(text: str) -> list[str]:
    """The repository paths among the code spans' words (a word with a slash), a test's node id included."""
    words = [word.rstrip(".,;:") for span in spans(text) for word in span.split()]
    return [word for word in words if "/" in word and not word.startswith("-")]


def make_commands(text: str) -> list[str]:
    return [target for span in spans(text) for target in re.findall(r"(?:^|\s)make ([^\s`]+)", span)]


def scenarios(text: str) -> list[str]:
    return [name for span in spans(text) for name in re.findall(r"molecule test -s (\S+)", span)]


def section(kind: str) -> str:
    parts = re.split(r"^## ", GUIDE.read_text(), flags=re.MULTILINE)
    found = [part for part in parts if part.startswith(f"Adding {kind}\n")]
    assert len(found) == 1, f"docs/contributing.md has no section '## Adding {kind}'"
    return found[0]


@cache
def defined_tests(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def path_problem(word: str) -> str | None:
    path, _, test = word.partition("::")
    pattern = PLACEHOLDER.sub("*", path.rstrip("/"))
    found = sorted(PROJECT.glob(pattern)) if "*" in pattern else [PROJECT / pattern]
    found = [p for p in found if p.is_dir()] if path.endswith("/") else [p for p in found if p.exists()]
    if not found:
        return f"{word}: no such path"
    if test and test not in defined_tests(found[0]):
        return f"{word}: {path} defines no {test}"
    return None


def test_every_path_and_test_the_guide_names_exists():
    named = paths(GUIDE.read_text())
    assert len(named) > 40, named  # the checklists are read, not skipped
    assert [problem for problem in map(path_problem, named) if problem] == []


def test_a_placeholder_path_that_matches_nothing_is_refused():
    assert path_problem("roles/<role>/vars/<Family>.yml") is None
    assert path_problem("roles/<role>/vars/<Family>.yaml") == "roles/<role>/vars/<Family>.yaml: no such path"
    assert path_problem("tests/unit/test_docs.py::test_no_such_test").endswith("defines no test_no_such_test")
    assert path_problem("tests/unit/test_docs.py/") == "tests/unit/test_docs.py/: no such path"


def test_every_make_target_the_guide_names_is_the_makefiles():
    named = set(make_commands(GUIDE.read_text()))
    assert {"lint", "unit", "docs"} <= named
    assert sorted(t for t in named if PLACEHOLDER.sub("%", t) not in make_targets()) == []


def test_every_molecule_scenario_the_guide_names_exists():
    named = set(scenarios(GUIDE.read_text())) - {"<scenario>"}
    existing = {path.parent.name for path in (PROJECT / "molecule").glob("*/molecule.yml")}
    assert named == existing, "the guide's table of scenarios names each scenario, and only those"


@pytest.mark.parametrize("kind", KINDS)
def test_each_checklist_names_its_files_its_tests_and_its_commands(kind):
    text = section(kind)
    assert [p for p in paths(text) if not p.startswith(("tests/", "benchrunner/tests/"))], kind
    assert [p for p in paths(text) if re.match(r"(benchrunner/)?tests/.*test_", p)], kind
    assert {"lint", "unit"} <= set(make_commands(text)), kind
