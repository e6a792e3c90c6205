"""Helpers the node-layer scenarios' testinfra tests share (imported through each scenario's conftest.py)."""

import json


def record(host, name):
    return json.loads(host.file(f"/etc/ansible/facts.d/hpcml_{name}.fact").content_string)


def held(host):
    return {line.split()[0] for line in host.check_output("dpkg --get-selections").splitlines() if line.endswith("hold")}


def installed_version(host, package):
    result = host.run("dpkg-query -W -f '${Version}' %s", package)
    return result.stdout if result.rc == 0 else None
