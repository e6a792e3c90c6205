"""`ansible-test sanity` (make lint, tools/collection_sanity.py) bootstraps pip into its venvs without
ci-files.testing.ansible.com, and the collection's ignore file matches the installed ansible-core."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import ansible
from ansible_test._internal.python_requirements import collect_bootstrap, prepare_pip_script

from unit_paths import PROJECT

TOOL = PROJECT / "tools" / "collection_sanity.py"
COLLECTION = PROJECT / "collections" / "ansible_collections" / "hpcml" / "cluster"
PYTHON = "{}.{}".format(*sys.version_info[:2])


def tool():
    spec = importlib.util.spec_from_file_location("collection_sanity", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def offline_env(home: Path, wheels: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and not k.lower().endswith("_proxy")}
    # No index, no pip.conf, and a dead proxy: a download from ci-files (or PyPI) fails instead of succeeding.
    return dict(env, HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels),
                https_proxy="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")


def test_ansible_tests_own_pip_bootstrap_works_on_an_offline_machine(tmp_path):
    home, wheels, venv = tmp_path / "home", tmp_path / "wheels", tmp_path / "venv"
    wheels.mkdir()
    tool().install_bootstrap(home, PYTHON)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The script ansible-test runs in each new sanity venv (run_pip), fed on stdin as it does.
    script = prepare_pip_script(collect_bootstrap(SimpleNamespace(version=PYTHON)))
    run = subprocess.run([str(python)], input=script, env=offline_env(home, wheels), capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Downloading pip" not in run.stdout + run.stderr
    assert subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, check=False).returncode == 0
    # get-pip.py is asked for no setuptools; ensurepip brings it on Python 3.11.
    assert subprocess.run([str(python), "-c", "import setuptools"], capture_output=True, check=False).returncode != 0


def test_a_downloaded_get_pip_is_left_alone_and_an_older_stand_in_replaced(tmp_path):
    sanity = tool()
    cached = sanity.install_bootstrap(tmp_path, PYTHON)
    assert cached.read_text() == sanity.SHIM.read_text()
    cached.write_text(f"# {sanity.MARKER}, an older copy\n")
    assert sanity.install_bootstrap(tmp_path, PYTHON).read_text() == sanity.SHIM.read_text()
    cached.write_text("# the real get-pip.py\n")
    assert sanity.install_bootstrap(tmp_path, PYTHON).read_text() == "# the real get-pip.py\n"


def test_the_sanity_ignores_are_for_the_installed_ansible_core_and_each_says_why():
    minor = ".".join(ansible.__version__.split(".")[:2])
    ignores = COLLECTION / "tests" / "sanity" / f"ignore-{minor}.txt"
    assert ignores.is_file(), f"ansible-test {minor} reads {ignores.name}; copy the previous one"
    for line in ignores.read_text().splitlines():
        assert re.fullmatch(r"\S+ [\w-]+:[\w-]+ # \S.*", line), line
