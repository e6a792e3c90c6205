"""Every role documents what it takes: argument specs that mirror its defaults, a README naming each variable."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from unit_paths import PROJECT

ROLES = sorted(p for p in (PROJECT / "roles").iterdir() if p.is_dir())


def load(path: Path):
    return yaml.safe_load(path.read_text()) if path.is_file() else None


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_mirror_defaults(role):
    defaults = load(role / "defaults" / "main.yml") or {}
    specs = load(role / "meta" / "argument_specs.yml")
    assert specs, f"{role.name} has no meta/argument_specs.yml"
    options = specs["argument_specs"]["main"]["options"]
    # An option without a default in the specs has none in defaults either: it is left to another home.
    unset = [n for n in options if "default" not in options[n]]
    assert sorted(options) == sorted([*defaults, *unset])
    assert all(options[n].get("description") for n in unset), unset
    for name, value in defaults.items():
        assert options[name].get("default") == value, name
        assert options[name].get("description"), name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_variables_carry_the_role_prefix(role):
    defaults = load(role / "defaults" / "main.yml") or {}
    assert [n for n in defaults if not n.startswith(role.name + "_")] == []


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_readme_lists_every_variable(role):
    readme = role / "README.md"
    assert readme.is_file(), f"{role.name} has no README.md"
    text = readme.read_text()
    options = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert [n for n in options if f"`{n}`" not in text] == []


def test_readmes_are_generated_from_the_specs():
    result = subprocess.run([sys.executable, str(PROJECT / "tools" / "role_readme.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
