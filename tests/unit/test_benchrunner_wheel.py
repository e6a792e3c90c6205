"""The benchrunner role's wheel build on the control host, as its task runs it: plays from one checkout at once (make
test runs molecule's python_env beside the e2e's plays) each leave one whole wheel, never an emptied folder."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import tomllib
import yaml

from unit_paths import PROJECT

TASKS = PROJECT / "roles" / "benchrunner" / "tasks" / "10-install.yml"
BUILD_TASK = "Build the benchrunner wheel on the control host"


def build_task() -> dict:
    [task] = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == BUILD_TASK]
    return task


def build(dist) -> subprocess.CompletedProcess:
    """The task's command line with the values its play gives it."""
    task = build_task()
    argv = task["ansible.builtin.command"]["argv"][:4]
    return subprocess.run([*argv, str(dist), sys.executable, str(PROJECT / "benchrunner")], capture_output=True,
                          text=True, env={**os.environ, **task["environment"]}, timeout=300, check=False)


def test_builds_at_once_leave_one_whole_wheel_and_no_scratch(tmp_path):
    dist = tmp_path / "benchrunner-dist"
    dist.mkdir()
    (dist / "benchrunner-0.0.1-py3-none-any.whl").write_text("an older version's wheel")
    # Two at once, as two plays: the command this replaced (rm -rf, then pip wheel in the source tree) failed both.
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: build(dist), range(2)))
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    version = tomllib.loads((PROJECT / "benchrunner" / "pyproject.toml").read_text())["project"]["version"]
    [wheel] = list(dist.iterdir())
    assert wheel.name == f"benchrunner-{version}-py3-none-any.whl"
    # Each build's scratch folder beside the wheels is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchrunner-dist"]
    # Byte-identical when the code is: the copy to the nodes reports real changes only.
    first = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert build(dist).returncode == 0
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == first
