#!/usr/bin/env python3
"""`ansible-test sanity` on the hpcml.cluster collection (make lint), on hosts that cannot reach ansible-test's
download server.

ansible-test bootstraps pip into each sanity venv with a get-pip.py it downloads from ci-files.testing.ansible.com,
unless ~/.ansible/test/cache/get_pip_<version>.py exists (its own cache, the place its error message says to put
one). We put tools/ansible_test_get_pip.py there, which uses the Python's ensurepip instead: nothing in
site-packages is patched. A get-pip.py that ansible-test downloaded itself is left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

PROJECT = Path(__file__).resolve().parents[1]
COLLECTION = PROJECT / "collections" / "ansible_collections" / "hpcml" / "cluster"
SHIM = Path(__file__).with_name("ansible_test_get_pip.py")
MARKER = "hpcml: ansible-test's pip bootstrap"


def pip_version(python: str) -> str:
    """The pip ansible-test bootstraps for this Python (it names its cached get-pip.py after it)."""
    # Internal to ansible-test; the only place the pinned version lives.
    from ansible_test._internal.python_requirements import get_venv_packages  # noqa: PLC0415 (needs ansible-test)

    return get_venv_packages(SimpleNamespace(version=python))["pip"]


def install_bootstrap(home: Path, python: str) -> Path:
    cached = home / ".ansible" / "test" / "cache" / f"get_pip_{pip_version(python).replace('.', '_')}.py"
    current = cached.read_text() if cached.exists() else None
    if current is None or (MARKER in current and current != SHIM.read_text()):
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHIM, cached)
    return cached


def main() -> int:
    python = "{}.{}".format(*sys.version_info[:2])
    install_bootstrap(Path.home(), python)
    started = time.monotonic()
    ansible_test = shutil.which("ansible-test", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    code = subprocess.run([ansible_test, "sanity", "--local", "--python", python, *sys.argv[1:]], cwd=COLLECTION,
                          check=False).returncode
    print(f"ansible-test sanity: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
