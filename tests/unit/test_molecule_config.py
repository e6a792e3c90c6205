"""The molecule scenarios share one base configuration (issue 25, item 3): molecule deep-merges each scenario's
molecule.yml over .config/molecule/config.yml, so a scenario holds only what differs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from molecule.util import find_vcs_root

from unit_paths import PROJECT

BASE = PROJECT / ".config" / "molecule" / "config.yml"
SCENARIOS = sorted((PROJECT / "molecule").glob("*/molecule.yml"))


def leaves(data: object, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    """Every value by its key path; lists are leaves, as molecule replaces them whole when it merges."""
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in leaves(value, (*path, key)).items()}
    return {path: data}


def test_molecule_finds_the_base_config_at_the_repository_root():
    # Molecule looks for .config/molecule/config.yml at the root of the repository it runs in.
    assert Path(find_vcs_root(PROJECT)) == PROJECT
    assert BASE.is_file()
    assert [p.parent.name for p in SCENARIOS] == ["node_base", "node_layer", "python_env", "slurm"], SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.parent.name for p in SCENARIOS])
def test_a_scenario_restates_nothing_the_base_config_sets(scenario):
    base = leaves(yaml.safe_load(BASE.read_text()))
    own = leaves(yaml.safe_load(scenario.read_text()))
    assert own, f"{scenario} is empty"
    assert {path: value for path, value in own.items() if base.get(path) == value} == {}


def test_scenarios_that_run_side_by_side_share_no_network_and_no_container():
    # make molecule runs scenarios at the same time; a scenario's destroy removes its network and its containers.
    owners: dict[tuple[str, str], str] = {}
    for scenario in SCENARIOS:
        platforms = yaml.safe_load(scenario.read_text())["platforms"]
        networks = {platform["network"] for platform in platforms}
        assert len(networks) == 1, f"{scenario}: {networks}"
        for key in [("network", networks.pop()), *(("container", platform["name"]) for platform in platforms)]:
            assert key not in owners, f"{key} is in both {owners.get(key)} and {scenario.parent.name}"
            owners[key] = scenario.parent.name
