"""roles/provisioned: which hosts a run provisions, decided from what each was last provisioned with."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from playbook_run import play

from ansible_collections.hpcml.cluster.plugins.lookup.tree_digest import tree_digest
from unit_paths import PROJECT

PLAYBOOKS = PROJECT / "playbooks"


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_digest_follows_names_and_contents_not_byte_code(tmp_path):
    files = {"roles/a/tasks/main.yml": "---\n", "roles/b/defaults/main.yml": "b_x: 1\n"}
    first = tree_digest([str(tree(tmp_path / "one", files))])
    assert tree_digest([str(tree(tmp_path / "two", files))]) == first
    tree(tmp_path / "two", {"roles/a/__pycache__/x.cpython-311.pyc": "junk", "roles/a/y.pyc": "junk",
                            "roles/a/z.egg-info/PKG-INFO": "junk", "roles/a/README.md": "# a\n"})
    assert tree_digest([str(tmp_path / "two")]) == first
    tree(tmp_path / "two", {"roles/b/defaults/main.yml": "b_x: 2\n"})
    assert tree_digest([str(tmp_path / "two")]) != first
    changed = tree_digest([str(tmp_path / "two")])
    (tmp_path / "two" / "roles" / "b" / "defaults" / "main.yml").rename(tmp_path / "two" / "roles" / "b" / "other.yml")
    assert tree_digest([str(tmp_path / "two")]) not in (first, changed)


def test_a_missing_input_is_not_an_empty_one(tmp_path):
    (tmp_path / "empty").mkdir()
    assert tree_digest([str(tmp_path / "empty")]) != tree_digest([str(tmp_path / "absent")])


def provision(tmp_path: Path, project: Path, **settings: object):
    # Between the two, the run generates a credential (as a first run makes the MUNGE key): the record holds it.
    tasks = [{"name": "digest", "ansible.builtin.include_role": {"name": "provisioned", "tasks_from": "digest"}},
             {"name": "folder", "ansible.builtin.file": {"path": str(tmp_path / "credentials"), "state": "directory",
                                                        "mode": "0700"}},
             {"name": "generate", "ansible.builtin.copy": {
                 "content": "key\n", "dest": str(tmp_path / "credentials" / "munge.key"), "mode": "0600"}},
             {"name": "record", "ansible.builtin.include_role": {"name": "provisioned", "tasks_from": "record"}}]
    return play(tmp_path, tasks, extravars={"_provisioned_fact_dir": str(tmp_path / "facts.d"),
                                            "cluster_project_dir": str(project),
                                            "cluster_credentials_dir": str(tmp_path / "credentials"), **settings})


def said(run) -> str:
    return next(line for line in run.stdout.splitlines() if "by this run:" in line)


def test_a_host_is_recorded_then_left_out_until_its_inputs_change(tmp_path):
    inputs = yaml.safe_load((PROJECT / "roles" / "provisioned" / "vars" / "main.yml").read_text())["_provisioned_project_inputs"]
    project = tree(tmp_path / "project", {**{f"{name}/.keep" if "." not in name else name: "" for name in inputs},
                                          "roles/openmpi/defaults/main.yml": "openmpi_x: 1\n"})
    first = provision(tmp_path, project)
    assert first.returncode == 0 and "provisioned by this run: not provisioned by site.yml before" in said(first)
    record = json.loads((tmp_path / "facts.d" / "hpcml_provisioned.fact").read_text())
    assert len(record["digest"]) == 64 and record["stack"] == "baremetal"

    again = provision(tmp_path, project)
    assert again.returncode == 0 and f"skipped by this run: provisioned {record['time']}" in said(again)
    assert again.changed == 0

    # A setting of a provisioning role (here an extra variable) is an input; the benchmark's settings are not.
    assert "skipped by" in said(provision(tmp_path, project, benchrunner_launcher="srun"))
    changed = provision(tmp_path, project, openmpi_mca_params={"btl": "^openib"})
    assert f"its inputs changed since {record['time']}" in said(changed)

    tree(project, {"roles/openmpi/defaults/main.yml": "openmpi_x: 2\n"})
    assert "its inputs changed since" in said(provision(tmp_path, project, openmpi_mca_params={"btl": "^openib"}))


def test_a_corrupt_record_is_provisioned_again_and_named_corrupt(tmp_path):
    inputs = yaml.safe_load((PROJECT / "roles" / "provisioned" / "vars" / "main.yml").read_text())["_provisioned_project_inputs"]
    project = tree(tmp_path / "project", {f"{name}/.keep" if "." not in name else name: "" for name in inputs})
    record = tmp_path / "facts.d" / "hpcml_provisioned.fact"
    record.parent.mkdir()
    # Cut short as a full disk or a power loss leaves it (neither JSON nor INI), then empty (setup reads it as {}).
    for text, problem in (('{\n    "digest": "3f2a', "it is neither JSON nor INI"), ("", "it holds no digest and time")):
        record.write_text(text)
        run = provision(tmp_path, project)
        assert run.returncode == 0, run.stdout[-3000:]
        assert f'"provisioned by this run: its record {record} is corrupt ({problem})"' in said(run), said(run)
        # Provisioned again, the record is whole again and the next run leaves the host out.
        assert len(json.loads(record.read_text())["digest"]) == 64
        assert "skipped by this run: provisioned " in said(provision(tmp_path, project))


def test_every_role_the_provisioning_plays_run_has_its_settings_hashed():
    listed = set(yaml.safe_load((PROJECT / "roles" / "provisioned" / "vars" / "main.yml").read_text())["_provisioned_roles"])
    run = set()
    for name in ("node.yml", "validate.yml", "baremetal.yml", "kubernetes.yml"):
        for item in yaml.safe_load((PLAYBOOKS / name).read_text()):
            run.update(role["role"] for role in item.get("roles", []))
            run.update(task["name"] for task in _includes(item.get("tasks", [])))
    for role in list(run):
        meta = yaml.safe_load((PROJECT / "roles" / role / "meta" / "main.yml").read_text())
        run.update(dep["role"] if isinstance(dep, dict) else dep for dep in meta.get("dependencies") or [])
    # benchrunner installs from its source (a hashed input); its variables are the job's, resolved per run.
    run -= {"provisioned", "benchrunner"}
    assert {"openmpi", "slurm", "nvidia_driver", "containerd"} <= run
    assert run - listed == set(), "add these roles to _provisioned_roles in roles/provisioned/vars/main.yml"


def _includes(tasks: list) -> list[dict]:
    found = []
    for task in tasks:
        found.extend(_includes(task.get("block", [])))
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if key in task and "{{" not in task[key]["name"]:
                found.append(task[key])
    return found


def test_a_project_folder_without_the_provisioning_files_stops_the_run(tmp_path):
    run = provision(tmp_path, tree(tmp_path / "elsewhere", {"site.yml": "---\n"}))
    assert run.refused("not found under cluster_project_dir")
    assert not (tmp_path / "facts.d").exists()
