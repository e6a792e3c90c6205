"""Fixtures handing tests fresh, valid result documents and run folders."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from benchrunner import results
from documents import rank_document


@pytest.fixture
def make_rank():
    return lambda *args, **kwargs: copy.deepcopy(rank_document(*args, **kwargs))


@pytest.fixture
def run_dir(tmp_path: Path, make_rank):
    """A results/<run-id>/raw folder holding valid rank files for ranks 0 and 1."""

    def build(*documents: dict[str, Any]) -> Path:
        directory = tmp_path / "results" / documents[0]["run_id"]
        for document in documents:
            results.save(results.RANK_RESULT, document, directory / "raw" / f"rank-{document['rank']:05d}.json")
        return directory

    return build
