"""One home for each shared value (issue 15): the cluster role holds them, plays pull it in first, roles read only
their own variables and its, the inventory groups are named in one place, and no two roles write the same file.
Facts one role sets and others read are declared, with their owner, in docs/shared-values.md (issue 25)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from benchrunner import cli
from unit_paths import PROJECT

ROLES = PROJECT / "roles"
SHARED = ROLES / "cluster"
SHARED_DOC = PROJECT / "docs" / "shared-values.md"
FACTS_MODULES = PROJECT / "collections" / "ansible_collections" / "hpcml" / "cluster" / "plugins" / "modules"
PLAYBOOKS = sorted((PROJECT / "playbooks").glob("*.yml"))
# Every role but the cluster role, whose values these are; the benchmark's role (benchrunner) included.
CHECKED_ROLES = sorted(p for p in ROLES.iterdir() if p.is_dir() and p.name != "cluster")
WRITERS = {"ansible.builtin.template": "dest", "ansible.builtin.copy": "dest", "ansible.builtin.get_url": "dest",
           "ansible.builtin.lineinfile": "path", "ansible.builtin.blockinfile": "path",
           "ansible.builtin.replace": "path", "community.general.ini_file": "path"}


def load(path: Path) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def shared_names() -> dict:
    return {**load(SHARED / "defaults" / "main.yml"), **load(SHARED / "vars" / "main.yml")}


def test_the_shared_role_is_variables_only_and_named_in_the_docs():
    assert sorted(p.name for p in SHARED.iterdir()) == ["README.md", "defaults", "meta", "vars"]
    doc = SHARED_DOC.read_text()
    assert [name for name in shared_names() if f"`{name}`" not in doc] == []


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=[p.name for p in PLAYBOOKS])
def test_every_play_pulls_in_the_shared_values_first(playbook):
    plays = [play for play in yaml.safe_load(playbook.read_text()) if "hosts" in play]
    assert plays, f"{playbook.name} has no plays"
    for play in plays:
        roles = [r["role"] if isinstance(r, dict) else r for r in play.get("roles", [])]
        assert roles[:1] == ["cluster"], f"{playbook.name}: play '{play['name']}' starts with {roles[:1]}"


def test_plays_name_only_the_shared_groups():
    groups = {v for k, v in shared_names().items() if k.endswith("_group")}
    assert groups == {"nodes", "slurm_controller", "kube_control_plane"}
    named = set()
    for playbook in PLAYBOOKS:
        for play in yaml.safe_load(playbook.read_text()):
            if "hosts" in play:
                named |= {part.lstrip("!&") for part in play["hosts"].split(":")}
    assert named - {"localhost"} == groups


def strip_comments(text: str) -> str:
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def role_sources(role: Path) -> str:
    return "\n".join(strip_comments(p.read_text()) for sub in ("defaults", "vars", "tasks", "templates", "handlers")
                     for p in sorted((role / sub).rglob("*")) if p.is_file())


@pytest.mark.parametrize("role", CHECKED_ROLES, ids=[r.name for r in CHECKED_ROLES])
def test_roles_name_no_inventory_group_literally(role):
    literal = re.findall(r"groups\[\s*['\"]([^'\"]+)['\"]\s*\]", role_sources(role))
    assert literal == [], f"{role.name} names groups {literal}; use the cluster role's *_group variables"


# Settings of another role a role still reads, each with the reason it is not yet a shared value; a new one fails.
CROSS_READS = {
    # The node layer's own couplings, left to its rework: the Fabric Manager and GPUDirect's module rebuild follow
    # the driver's version and modules, the driver's source follows the repository's, GPUDirect's route the RDMA
    # stack, and validation judges by the driver's reboot setting, GPUDirect's route and node_facts' record folder.
    ("nvidia_fabricmanager", "nvidia_driver_version"),
    ("nvidia_driver", "nvidia_repo_source"),
    ("gpudirect", "nvidia_driver_version"),
    ("gpudirect", "nvidia_driver_kernel_modules"),
    ("gpudirect", "rdma_stack"),
    ("node_checks", "nvidia_driver_reboot"),
    ("node_checks", "gpudirect_route"),
    ("node_checks", "node_facts_fact_file"),
}


def role_arguments(role: Path) -> set[str]:
    """Names a role passes as the declared arguments of a role it includes (include_role's vars, each an option of
    the included entry point's argument spec): calling a role, not reading its settings."""
    passed = set()

    def walk(tasks):
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
            include = task.get("ansible.builtin.include_role")
            # A role named at run time (a loop over roles) is not resolved: what it is passed stays counted as read.
            if include and "{{" not in include["name"]:
                specs = load(ROLES / include["name"] / "meta" / "argument_specs.yml")["argument_specs"]
                options = specs.get(include.get("tasks_from", "main"), {}).get("options", {})
                passed.update(name for name in task.get("vars", {}) if name in options)

    for path in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return passed


def test_roles_read_no_other_roles_settings():
    settings = {role.name: set(load(role / "defaults" / "main.yml")) for role in CHECKED_ROLES}
    found = set()
    for role in CHECKED_ROLES:
        words = set(re.findall(r"\b[a-z][a-z0-9_]*\b", role_sources(role))) - role_arguments(role)
        found |= {(role.name, name) for other, names in settings.items() if other != role.name for name in names & words}
    assert found == CROSS_READS


def test_role_arguments_are_seen():
    # The exemption above must see the calls it exempts, or it would hide real reads.
    assert {"package_source_packages", "package_source_version", "package_source_hold"} <= role_arguments(
        ROLES / "cuda_toolkit")


def os_tables(value, where: str) -> list[str]:
    """Mappings from two or more distributions to lists of versions, anywhere in a variables file."""
    found = []
    if isinstance(value, dict):
        if len(set(value) & DISTRIBUTIONS) >= 2 and all(isinstance(v, list) for v in value.values()):
            found.append(where)
        for key, inner in value.items():
            found += os_tables(inner, f"{where}.{key}")
    return found


DISTRIBUTIONS = {"Debian", "Ubuntu", "RedHat", "Rocky", "AlmaLinux", "CentOS", "SLES", "openSUSE Leap"}


def test_one_supported_os_table():
    tables = []
    for path in sorted(ROLES.glob("*/*/*.yml")) + sorted((PROJECT / "playbooks").rglob("*.yml")):
        if path.parent.name in ("defaults", "vars") or path.parent.parent.name == "playbooks":
            tables += os_tables(yaml.safe_load(path.read_text()), str(path.relative_to(PROJECT)))
    assert tables == ["roles/cluster/vars/main.yml.cluster_supported_os"]
    table = shared_names()["cluster_supported_os"]
    assert {"Debian", "RedHat"} <= set(table) and all(table.values()), table
    # Both checks of a node's OS read it, through the one filter that judges it (test_unsupported_os.py).
    for role, tasks in (("preflight", "nodes.yml"), ("nvidia_driver", "00-preflight.yml")):
        check = "ansible_facts | hpcml.cluster.unsupported_os(cluster_supported_os)"
        assert check in (ROLES / role / "tasks" / tasks).read_text(), role
        assert "cluster" in load(ROLES / role / "meta" / "main.yml")["dependencies"], role


# Galaxy's platform names and versions for the table's entries: Debian and Ubuntu by codename, Red Hat's family as EL.
GALAXY_PLATFORMS = {("Debian", "12"): ("Debian", "bookworm"), ("Ubuntu", "22.04"): ("Ubuntu", "jammy"),
                    ("Ubuntu", "24.04"): ("Ubuntu", "noble"), ("RedHat", "8"): ("EL", "8"), ("RedHat", "9"): ("EL", "9"),
                    ("Rocky", "8"): ("EL", "8"), ("Rocky", "9"): ("EL", "9")}


def test_every_roles_platforms_are_in_the_supported_os_table():
    table = shared_names()["cluster_supported_os"]
    supported = {GALAXY_PLATFORMS[(name, version)] for name, versions in table.items() for version in versions}
    claimed = {}
    for meta in sorted(ROLES.glob("*/meta/main.yml")):
        for platform in load(meta).get("galaxy_info", {}).get("platforms", []):
            for version in platform["versions"]:
                claimed.setdefault((platform["name"], str(version)), []).append(meta.parts[-3])
    assert claimed, "no role declares platforms"
    assert {key: roles for key, roles in claimed.items() if key not in supported} == {}


def resolve(text: str, variables: dict) -> str:
    """Substitutes plain `{{ name }}` references by the role's string values until none is left to substitute."""
    for _ in range(5):
        text = re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}",
                      lambda m: str(variables[m.group(1)]) if isinstance(variables.get(m.group(1)), str) else m.group(0),
                      text)
    return text


def written_files(role: Path) -> set[str]:
    variables = {**load(SHARED / "defaults" / "main.yml"), **load(SHARED / "vars" / "main.yml"),
                 **load(role / "defaults" / "main.yml"), **load(role / "vars" / "main.yml")}
    found = set()

    def walk(tasks):
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
            for module, option in WRITERS.items():
                args = task.get(module) or task.get(module.rsplit(".", 1)[1])
                if isinstance(args, dict) and option in args:
                    found.add(resolve(str(args[option]), variables))

    for path in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return found


def test_no_two_roles_write_the_same_file():
    writers: dict[str, list[str]] = {}
    for role in sorted(p for p in ROLES.iterdir() if (p / "tasks").is_dir()):
        for path in written_files(role):
            writers.setdefault(path, []).append(role.name)
    # The scan must see the files it is about, or it proves nothing.
    assert writers.get("/etc/containerd/config.toml") == ["containerd"], writers.get("/etc/containerd/config.toml")
    assert writers.get("/etc/docker/daemon.json") == ["nvidia_container_toolkit"]
    assert len(writers) > 40, sorted(writers)
    assert {path: roles for path, roles in writers.items() if len(roles) > 1} == {}


def test_benchrunner_deploy_offers_the_shared_stacks():
    parser = argparse.ArgumentParser()
    cli._add_playbook_options(parser)
    stack = next(action for action in parser._actions if "--stack" in action.option_strings)
    assert list(stack.choices) == shared_names()["cluster_stacks"]


def module_facts() -> dict[str, set[str]]:
    """The facts each of the collection's facts modules returns, read from its exit_json call."""
    found = {f"hpcml.cluster.{path.stem}": set(re.findall(r"ansible_facts=\{\"(\w+)\"", path.read_text()))
             for path in sorted(FACTS_MODULES.glob("*_facts.py"))}
    assert found and all(found.values()), f"no facts read from the modules in {FACTS_MODULES}: {found}"
    return found


def facts_set(role: Path, modules: dict[str, set[str]]) -> set[str]:
    """What a role's tasks make a fact: set_fact and register names, what the facts modules it calls return, and the
    local facts (ansible_local.hpcml_<name>) it writes, itself or through node_facts' record entry point."""
    names = {f"ansible_local.hpcml_{m.group(1)}" for path in written_files(role)
             if (m := re.fullmatch(r"/etc/ansible/facts\.d/hpcml_(\w+)\.fact", path))}

    def walk(tasks):
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
            set_fact = task.get("ansible.builtin.set_fact") or task.get("set_fact")
            if isinstance(set_fact, dict):
                names.update(set(set_fact) - {"cacheable"})
            if "register" in task:
                names.add(task["register"])
            names.update(*(facts for module, facts in modules.items() if module in task))
            include = task.get("ansible.builtin.include_role") or {}
            if include.get("name") == "node_facts" and include.get("tasks_from") == "record":
                names.add(f"ansible_local.hpcml_{task['vars']['node_facts_record_name']}")

    for path in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return names


def names_read(text: str) -> set[str]:
    """The names a role's sources mention; a local fact (a line's ansible_local, or its file) as ansible_local.<name>,
    apart from the facts module of the same name (the rdma role's record and rdma_facts are both hpcml_rdma)."""
    names = set()
    for line in text.splitlines():
        local = re.findall(r"\b(hpcml_\w+)\.fact\b", line)
        if "ansible_local" in line:
            local += re.findall(r"\b(hpcml_\w+)\b", line)
        names |= {f"ansible_local.{name}" for name in local}
        names |= set(re.findall(r"\b[a-z_][a-z0-9_]*\b", line)) - set(local)
    return names


def looped_local_reads(role: Path) -> set[str]:
    """Local facts a task reads by name from a loop (`hpcml_{{ item }}.fact`, loop over a list of the role's vars)."""
    variables = {**load(role / "defaults" / "main.yml"), **load(role / "vars" / "main.yml")}
    names = set()

    def walk(tasks):
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
            loop = re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", str(task.get("loop", "")))
            if loop and re.search(r"hpcml_\{\{\s*item\s*\}\}\.fact", str(task)):
                items = variables.get(loop.group(1))
                assert isinstance(items, list), f"{role.name}: {loop.group(1)} is not a list in the role's vars"
                names.update(f"ansible_local.hpcml_{item}" for item in items)

    for path in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return names


def shared_facts() -> dict[str, tuple[list[str], list[str]]]:
    """Each fact some role reads that another role sets: its setters and the roles that read it without setting it."""
    modules = module_facts()
    setters: dict[str, list[str]] = {}
    for role in CHECKED_ROLES:
        for name in facts_set(role, modules):
            setters.setdefault(name, []).append(role.name)
    words = {role.name: names_read(role_sources(role)) | looped_local_reads(role) for role in CHECKED_ROLES}
    shared = {}
    for name, owners in setters.items():
        readers = sorted(role for role, found in words.items() if name in found and role not in owners)
        if readers:
            shared[name] = (sorted(owners), readers)
    return shared


def declared_facts() -> dict[str, tuple[list[str], list[str]]]:
    """The table under "Facts shared between roles" in docs/shared-values.md: fact, set by, read by."""
    section = SHARED_DOC.read_text().split("\n## Facts shared between roles\n", 1)
    assert len(section) == 2, f"{SHARED_DOC.name} has no section 'Facts shared between roles'"
    rows = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("| `")]
    assert rows, f"{SHARED_DOC.name}: the section 'Facts shared between roles' has no table rows"
    declared = {}
    for row in rows:
        fact, owners, readers = (re.findall(r"`([a-z_.]+)`", cell) for cell in row.split("|")[1:4])
        declared[fact[0]] = (sorted(owners), sorted(readers))
    return declared


def test_facts_shared_between_roles_are_declared_with_their_owner():
    found = shared_facts()
    # The scan must see the fact this check was written for, or it proves nothing.
    assert len(found.get("node_facts_hardware", ((), []))[1]) >= 9, found.get("node_facts_hardware")
    declared = declared_facts()
    undeclared = {name: value for name, value in found.items() if declared.get(name) != value}
    stale = {name: value for name, value in declared.items() if found.get(name) != value}
    assert undeclared == {}, f"facts read by other roles than the one setting them, not (or differently) declared in " \
                             f"{SHARED_DOC.name} as (set by, read by): {undeclared}"
    assert stale == {}, f"{SHARED_DOC.name} declares facts no longer set or read so: {stale}"
