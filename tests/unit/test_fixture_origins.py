"""Every recorded tool output among the fixtures names where it was published (fixtures/ORIGINS.md)."""

import re

from unit_paths import FIXTURES

# The tools of the node layer's parsers; a fixture of one of them is named after it.
TOOLS = ("nvidia-smi-topo-m.", "nvidia-smi-q-x.", "nvidia-smi-nvlink-e.", "ibv_devinfo.", "ibstat.", "nccl-tests.",
         "dcgmi-diag.")
ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| [^|]+ \| [^|]+ \| <(?P<url>https://github\.com/[^>]+)> \| [^|]+ \|$")


def origins() -> dict[str, str]:
    rows = [ROW.match(line) for line in (FIXTURES / "ORIGINS.md").read_text().splitlines() if line.startswith("| `")]
    assert all(rows), "a table row of ORIGINS.md is not | `fixture` | tool | shape | <https://github.com/...> | part |"
    return {row["name"]: row["url"] for row in rows}


def test_every_recorded_output_names_its_origin():
    recorded = sorted(path.name for path in FIXTURES.iterdir() if path.name.startswith(TOOLS))
    named = origins()
    assert [name for name in recorded if name not in named] == []
    assert [name for name in named if name not in recorded] == []


def test_origins_point_at_a_commit_or_an_issue():
    # A branch name would let the recording change under the link.
    pinned = re.compile(r"^https://github\.com/[^/]+/[^/]+/(blob/[0-9a-f]{40}/\S+|issues/\d+)$")
    assert [url for url in origins().values() if not pinned.match(url)] == []


def test_at_least_thirty_recorded_outputs_cover_every_tool():
    named = origins()
    assert len(named) >= 30
    assert {tool for tool in TOOLS for name in named if name.startswith(tool)} == set(TOOLS)
