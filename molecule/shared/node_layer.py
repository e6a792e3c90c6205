"""Helpers the node-layer scenarios' testinfra tests share (imported through each scenario's conftest.py)."""

import json

NO_GPU = "no NVIDIA GPU found on the PCI bus"


def is_image(host):
    """The scenario's image node installs from the stand-in mirror; the cpu node must skip every hardware step."""
    return host.backend.get_hostname().endswith("-image")


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
