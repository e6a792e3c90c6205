"""The README is a guide a newcomer reads in five minutes (issue 25, item 4), pointing at docs/ for the rest, and
every link in the project's documentation leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from unit_paths import PROJECT, make_targets

README = PROJECT / "README.md"
DOCS = sorted((PROJECT / "docs").glob("*.md"))
LINKED = [README, PROJECT / "benchrunner" / "README.md", *DOCS]
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("doc", LINKED, ids=[str(p.relative_to(PROJECT)) for p in LINKED])
def test_every_relative_link_leads_somewhere(doc):
    links = [link for link in LINK.findall(doc.read_text()) if not re.match(r"[a-z]+:", link)]
    broken = []
    for link in links:
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
            broken.append(link)
    assert broken == [], f"{doc.relative_to(PROJECT)}: links to nothing: {broken}"


def test_the_readme_points_at_every_doc():
    text = README.read_text()
    assert [p.name for p in DOCS if f"(docs/{p.name})" not in text] == []


def test_the_quickstart_is_the_two_make_targets_ci_runs():
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", quickstart.split("```sh", 1)[1].split("```", 1)[0], re.MULTILINE)
    assert commands == ["make demo", "make test"]
    assert {"demo", "test"} <= make_targets()
    assert (PROJECT / ".ci" / "run").read_text().rstrip().endswith("make test")


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs: runs of lines outside code blocks, tables and headings; a list item starts one of its own."""
    found, current, fenced = [], [], False
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        prose = not fenced and line.strip() and not line.lstrip().startswith(("|", "#", "```"))
        if current and (not prose or re.match(r"\s*(-|\d+\.) ", line)):
            found.append(" ".join(current))
            current = []
        if prose:
            current.append(line)
    return found


def test_the_readme_stays_a_short_guide():
    text = README.read_text()
    assert len(text.splitlines()) <= 180, "README.md grew past 180 lines: move the detail into docs/"
    long = [p[:60] for p in paragraphs(text) if len(p.split()) > 120]
    assert long == [], f"README.md paragraphs over 120 words: {long}"
