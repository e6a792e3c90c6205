"""The lab image's cache of code compiled from zipped sources (roles/lab/files/zipimport_cache.py), in a Python of its
own each time: it replaces zipimport's compile for the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from unit_paths import PROJECT

HOOK = PROJECT / "roles" / "lab" / "files" / "zipimport_cache.py"
SOURCE = "def fail():\n    raise RuntimeError('from the zip')\n\nVALUE = 42\n"

# Imports the zip's module through the hook installed over CACHE, and says what it found.
PROBE = """
import importlib.util, json, sys, traceback, zipimport
spec = importlib.util.spec_from_file_location("hook", sys.argv[1])
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)
installed = hook.install(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import payload
try:
    payload.fail()
except RuntimeError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({"installed": installed, "value": payload.VALUE, "where": where,
                  "compile": zipimport._compile_source.__name__}))
"""


def payload_zip(folder: Path, name: str) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("payload.py", SOURCE)
    return path


def probe(cache: Path, archive: Path) -> dict:
    # Without site (-S): the test venv's own hook (make deps) must not sit under the one probed.
    done = subprocess.run([sys.executable, "-S", "-c", PROBE, str(HOOK), str(cache), str(archive)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def test_a_zipped_source_is_compiled_once_then_loaded_under_each_archives_own_name(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    first = payload_zip(tmp_path, "run1.zip")
    found = probe(cache, first)
    assert found == {"installed": True, "value": 42, "where": f"{first}/payload.py", "compile": "cached"}
    kept = list(cache.iterdir())
    assert len(kept) == 1 and kept[0].stat().st_size > 0
    # A second run's payload, from another path: the kept code, with the new path in its traceback.
    second = payload_zip(tmp_path, "run2.zip")
    assert probe(cache, second)["where"] == f"{second}/payload.py"
    assert list(cache.iterdir()) == kept


def test_a_damaged_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    archive = payload_zip(tmp_path, "run.zip")
    probe(cache, archive)
    [entry] = cache.iterdir()
    entry.write_bytes(b"\x00not code")
    assert probe(cache, archive)["value"] == 42
    assert entry.read_bytes() != b"\x00not code"


def test_a_folder_others_may_write_to_or_that_is_missing_is_not_used(tmp_path):
    archive = payload_zip(tmp_path, "run.zip")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    for cache in (shared, tmp_path / "missing"):
        found = probe(cache, archive)
        assert (found["installed"], found["compile"], found["value"]) == (False, "_compile_source", 42)
    assert list(shared.iterdir()) == []


def test_the_test_venvs_python_keeps_its_module_runs_code():
    # make deps loads the hook into the venv the tests run in, over a folder of the venv's (the Makefile's
    # .test-installed step): where make ran as root, that folder is root's and the hook is in place.
    if os.geteuid() != 0:
        pytest.skip("the cache's folder is root's alone: run as another user, make test leaves the hook off")
    folder = Path(sys.prefix) / "zipimport-cache"
    assert folder.is_dir() and folder.stat().st_uid == 0, f"{folder}: run make deps, which makes it"
    found = subprocess.run([sys.executable, "-c", "import zipimport; print(zipimport._compile_source.__name__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert found == "cached", f"{sys.executable} compiles zipped sources itself: make deps installs the hook"
