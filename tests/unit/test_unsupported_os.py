"""The filter both checks of a node's operating system use (preflight for every node, nvidia_driver for its own),
read against the one table of supported systems (cluster_supported_os)."""

import pytest
import yaml

from ansible_collections.hpcml.cluster.plugins.filter.unsupported_os import unsupported_os
from unit_paths import PROJECT

SUPPORTED = yaml.safe_load((PROJECT / "roles" / "cluster" / "vars" / "main.yml").read_text())["cluster_supported_os"]
TABLE = "Debian 12; Ubuntu 22.04/24.04; RedHat 8/9; Rocky 8/9"


def facts(distribution: str, version: str, major: str) -> dict:
    return {"distribution": distribution, "distribution_version": version, "distribution_major_version": major}


@pytest.mark.parametrize("node", [
    facts("Debian", "12.7", "12"),
    # Ubuntu's releases are listed whole: 22 alone is no release.
    facts("Ubuntu", "22.04", "22"),
    facts("Ubuntu", "24.04", "24"),
    facts("Rocky", "9.4", "9"),
    facts("RedHat", "8.10", "8"),
])
def test_a_supported_system_has_no_problem(node):
    assert unsupported_os(node, SUPPORTED) == ""


@pytest.mark.parametrize("node", [
    facts("Debian", "11.9", "11"),
    facts("Ubuntu", "20.04", "20"),
    # A distribution the table does not name, and facts that could not be read.
    facts("SLES", "15.5", "15"),
    {},
])
def test_an_unsupported_system_is_named_with_every_supported_one(node):
    assert unsupported_os(node, SUPPORTED) == (f"runs {node.get('distribution')} {node.get('distribution_version')}; "
                                               f"supported: {TABLE}.")


def test_versions_read_as_numbers_still_match():
    # An inventory that sets the table with unquoted versions (RedHat: [8, 9]) means the same systems.
    assert unsupported_os(facts("RedHat", "9.4", "9"), {"RedHat": [8, 9]}) == ""
