"""Helpers the node-layer scenarios' testinfra tests share (imported through each scenario's conftest.py)."""

import json

import pytest

NO_GPU = "no NVIDIA GPU found on the PCI bus"


def is_image(host):
    """The scenario's image node installs from the stand-in mirror; the cpu node must skip every hardware step."""
    return host.backend.get_hostname().endswith("-image")


# A test that cannot see what it checks on a host skips there, saying what it could not see: returning early would
# report a pass for a check that never ran (tests/unit/test_molecule_tests.py keeps it so).
def only_on_image(host, what):
    """Skip on the cpu node, which has none of what an image-node test checks."""
    if not is_image(host):
        pytest.skip(f"{host.backend.get_hostname()} is the scenario's cpu node, where every hardware step skips: it has "
                    f"no {what} to check (the image node has)")


def only_on_cpu(host, role):
    """Skip on the image node, where the role runs the steps whose skip a cpu-node test checks."""
    if is_image(host):
        pytest.skip(f"{host.backend.get_hostname()} is the scenario's image node, where the {role} role runs its steps: "
                    "it has no skip to check (the cpu node has)")


def record(host, name):
    return json.loads(host.file(f"/etc/ansible/facts.d/hpcml_{name}.fact").content_string)


def held(host):
    return {line.split()[0] for line in host.check_output("dpkg --get-selections").splitlines() if line.endswith("hold")}


def installed_version(host, package):
    result = host.run("dpkg-query -W -f '${Version}' %s", package)
    return result.stdout if result.rc == 0 else None


def assert_skipped(host, name, reason=NO_GPU):
    """The cpu node: the role recorded a skip with the detection's reason and installed none of its packages."""
    state = record(host, name)
    assert state["steps"] == "skip"
    assert reason in state["reason"]
    return state
