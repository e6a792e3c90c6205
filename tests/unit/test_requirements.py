"""requirements.yml names every collection the project uses, at ranges the installed ansible bundle satisfies."""

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from unit_paths import PROJECT

OWN = {"ansible.builtin", "hpcml.cluster"}


def used_collections():
    found = set()
    for path in list((PROJECT / "roles").rglob("*.yml")) + list((PROJECT / "playbooks").glob("*.yml")):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            # Module and lookup/filter calls: "namespace.collection.name:" keys and "| namespace.collection.name".
            # A whole dotted name only: not the start of a sysctl (net.bridge.bridge-nf-...) or a label (a.b.io/x).
            for match in re.finditer(r"(?:^-?\s*|\|\s*|lookup\(')([a-z_]+\.[a-z_]+)\.[a-z_0-9]+(?=[:\s(']|$)", stripped):
                found.add(match.group(1))
    return found - OWN


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def test_every_used_collection_is_required():
    required = {c["name"] for c in yaml.safe_load((PROJECT / "requirements.yml").read_text())["collections"]}
    assert used_collections() - required == set()


def test_installed_bundle_satisfies_the_ranges():
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "list", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    installed = {}
    for collections in json.loads(out).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    for entry in yaml.safe_load((PROJECT / "requirements.yml").read_text())["collections"]:
        version = version_tuple(installed[entry["name"]])
        for bound in entry["version"].split(","):
            op, limit = re.match(r"([<>]=?)(.+)", bound.strip()).groups()
            limit = version_tuple(limit)
            assert {"<": version < limit, "<=": version <= limit, ">": version > limit, ">=": version >= limit}[op], \
                f"{entry['name']} {installed[entry['name']]} is outside {entry['version']}"
