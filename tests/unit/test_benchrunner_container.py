"""The benchrunner role's container: preflight refuses a runtime the nodes lack, a launcher that cannot start one and a
missing image; the image is converted once per runtime and image ID; every node's copy is checked against the control
host's digest; the job names the image and its digest. The role's own expressions, rendered by Ansible's templar in
this process (no play), and its conversion script run with stand-ins for the converters."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from unit_paths import PROJECT

ROLE = PROJECT / "roles" / "benchrunner"
CONVERT = ROLE / "files" / "convert-image.sh"
LOADER = DataLoader()
# The job request's lookups (the checkout's commit) need Ansible's plugins.
pytestmark = pytest.mark.usefixtures("ansible_plugins")
IMAGE_ID = "f" * 64
DIGEST = "sha256:" + "a" * 64
# What container_image.yml keeps on the control host.
CONTROL_HOST = {"_benchrunner_container_prepared": {"path": f"/cache/containers/charliecloud/{IMAGE_ID}.sqfs",
                                                    "digest": DIGEST, "changed": False}}


def tasks(file: str) -> dict[str, dict]:
    return {task["name"]: task for task in LOADER.load_from_file(str(ROLE / "tasks" / file), trusted_as_template=True)}


def templar(**settings: Any) -> Templar:
    """The role's defaults and vars under these settings, on a bare-metal cluster with a Slurm controller whose
    nodes have Charliecloud, the image converted as container_image.yml keeps it."""
    variables: dict[str, Any] = {}
    for part in (PROJECT / "roles" / "cluster" / "defaults", ROLE / "defaults", ROLE / "vars"):
        variables.update(LOADER.load_from_file(str(part / "main.yml"), trusted_as_template=True))
    variables.update({
        "playbook_dir": str(PROJECT / "playbooks"), "cluster_stack": "baremetal", "ansible_playbook_python": "python3",
        "cluster_slurm_controller_group": "slurm_controller",
        "groups": {"slurm_controller": ["head"], "nodes": ["node1", "node2"]}, "cluster_container_runtimes": ["charliecloud"],
        "benchrunner_container": "charliecloud", "benchrunner_job": {}, "inventory_hostname": "node1",
        "hostvars": {"localhost": CONTROL_HOST, "node1": {}, "node2": {}},
        **settings})
    return Templar(loader=LOADER, variables=variables)


def asserted(file: str, name: str, **settings: Any) -> tuple[bool, str]:
    """Whether the role's assert passes under these settings, and the message it fails with."""
    check = tasks(file)[name]["ansible.builtin.assert"]
    that = check["that"] if isinstance(check["that"], list) else [check["that"]]
    variables = templar(**settings)
    if "vars" in tasks(file)[name]:
        variables = templar(**settings, **tasks(file)[name]["vars"])
    return all(variables.evaluate_conditional(c) for c in that), " ".join(variables.template(check["fail_msg"]).split())


def test_a_runtime_the_nodes_lack_is_refused_naming_those_they_have():
    ok, message = asserted("container_image.yml", "Check the nodes have the container runtime",
                           benchrunner_container="enroot", cluster_container_runtimes=["charliecloud"])
    assert not ok
    assert message == ("benchrunner_container is enroot, which the nodes do not have: cluster_container_runtimes lists "
                       "charliecloud. Add it there (the hpc_containers role installs it), or set benchrunner_container "
                       "to one of: none, charliecloud.")
    assert asserted("container_image.yml", "Check the nodes have the container runtime")[0]


def test_a_launcher_that_cannot_start_a_container_is_refused_naming_those_that_can():
    ok, message = asserted("container_image.yml", "Check the launcher can start ranks in the container",
                           benchrunner_launcher="horovodrun")
    assert not ok
    launchers = templar().template(trust_as_template("{{ _benchrunner_launchers }}"))
    able = ", ".join(sorted(name for name, facts in launchers.items() if "charliecloud" in facts["containers"]))
    assert message == ("benchrunner_launcher horovodrun cannot start ranks in a charliecloud container (it takes no "
                       f"container). Launchers that can: {able}; or set benchrunner_container to none.")
    # The launcher a campaign's job names is the one checked; srun is the lab's default.
    assert asserted("container_image.yml", "Check the launcher can start ranks in the container")[0]
    assert not asserted("container_image.yml", "Check the launcher can start ranks in the container",
                        benchrunner_job={"launcher": "mpijob"})[0]


def test_a_missing_image_is_refused_naming_the_setting_and_how_to_build_it():
    missing = {"rc": 125, "stderr": "Error: localhost/hpcml-benchrunner:cpu: image not known\n", "stdout": ""}
    ok, message = asserted("container_image.yml", "Refuse a container without the benchmark image",
                           _benchrunner_container_source=missing, benchrunner_image="localhost/hpcml-benchrunner:cpu")
    assert not ok
    assert message == ("benchrunner_container is charliecloud, but the control host's podman has no image "
                       "localhost/hpcml-benchrunner:cpu (benchrunner_container_source_image) to convert: Error: "
                       "localhost/hpcml-benchrunner:cpu: image not known. Build it with `make image` "
                       "(benchrunner/Containerfile).")


def test_preflight_refuses_before_the_image_is_converted():
    names = list(tasks("container_image.yml"))
    assert names.index(CONVERT_TASK) > max(
        names.index(n) for n in names if n.startswith(("Check", "Refuse")))
    # resolve.yml prepares the image before benchrunner resolves the job that names it.
    resolve = list(tasks("resolve.yml"))
    assert resolve.index("Prepare the job's container image") < resolve.index("Resolve the job on the control host")


def test_the_job_names_the_image_on_the_nodes_and_its_digest():
    request = templar(benchrunner_container_image_dir="/shared/containers").template(REQUEST)
    assert request["container"] == {"runtime": "charliecloud", "image": f"/shared/containers/{IMAGE_ID}.sqfs",
                                    "digest": DIGEST}
    # In the virtualenv the job has no container key: benchrunner reads its absence as none.
    assert "container" not in templar(benchrunner_container="none").template(REQUEST)


REQUEST = trust_as_template("{{ _benchrunner_job_request }}")
CONVERT_TASK = "Convert the benchmark image once per image ID, mount points and packing, for {{ benchrunner_container }}"


def node_digests(**by_node: str | None) -> dict[str, dict]:
    """hostvars of the job's nodes with their copy's stat (None: no file there)."""
    return {node: {"_benchrunner_container_there": {"stat": {"exists": True, "checksum": digest} if digest else
                                                    {"exists": False}}} for node, digest in by_node.items()}


def copy_when(task: str, node: str, shared: bool, **by_node: str | None) -> bool:
    hostvars = {"localhost": CONTROL_HOST, **node_digests(**by_node)}
    variables = templar(hostvars=hostvars, inventory_hostname=node, benchrunner_container_image_shared=shared,
                        _benchrunner_container_there=hostvars[node]["_benchrunner_container_there"],
                        _benchrunner_placed={"hosts": list(by_node)})
    return variables.evaluate_conditional(tasks("container_copy.yml")[task]["when"])


def test_the_image_is_copied_once_to_a_shared_folder_and_to_each_node_that_lacks_it_otherwise():
    good, stale = "a" * 64, "b" * 64
    shared = "Copy the image to the shared folder, once, where a node has another"
    each = "Copy the image to each node that has another"
    assert copy_when(shared, "node1", True, node1=good, node2=None)
    assert copy_when(shared, "node1", True, node1=good, node2=stale)
    assert not copy_when(shared, "node1", True, node1=good, node2=good)
    assert not copy_when(each, "node1", True, node1=None, node2=None)
    assert copy_when(each, "node2", False, node1=good, node2=stale)
    assert not copy_when(each, "node1", False, node1=good, node2=stale)
    assert not copy_when(shared, "node1", False, node1=None, node2=None)


def test_a_node_whose_copy_differs_is_named_with_both_digests_before_the_job_starts():
    name = "Check every node's image is the one the control host converted"
    stale = {"stat": {"exists": True, "checksum": "b" * 64}}
    skipped = {"skipped": True, "changed": False}
    ok, message = asserted("container_copy.yml", name, inventory_hostname="node2", _benchrunner_container_there=stale,
                           _benchrunner_container_copied=skipped,
                           benchrunner_container_image_dir="/shared/containers", benchrunner_container_image_shared=True)
    assert not ok
    assert message == (f"node2's /shared/containers/{IMAGE_ID}.sqfs has digest sha256:{'b' * 64}, not the control "
                       f"host's {DIGEST} (/cache/containers/charliecloud/{IMAGE_ID}.sqfs): on a shared folder "
                       "(benchrunner_container_image_shared) this node sees another filesystem than the others, or the "
                       "file changed after it was copied. No rank started.")
    missing = {"stat": {"exists": False}}
    ok, message = asserted("container_copy.yml", name, _benchrunner_container_there=missing,
                           _benchrunner_container_copied=skipped)
    assert not ok and "has digest none (no file), not the control host's" in message
    # The digest read again after a copy is the one judged.
    fresh = {"changed": False, "stat": {"exists": True, "checksum": "a" * 64}}
    assert asserted("container_copy.yml", name, _benchrunner_container_there=stale, _benchrunner_container_copied=fresh)[0]
    # The run copies and checks before it launches anything.
    run = list(tasks("run.yml"))
    assert run.index("Put the container image on the job's nodes and check its digest on each") < run.index(
        "Run the job, then gather every rank's results")


def test_the_image_holds_the_mount_points_benchrunner_names_for_the_job_it_resolves_before_the_image():
    task = tasks("container_image.yml")["Find the mount points the job's container binds"]
    # Resolved before the image is converted: the request needs no converted image yet, its folder stands in.
    early = templar(hostvars={"localhost": {}, "node1": {"ansible_facts": {"hostname": "n1"}}},
                    cluster_nodes_group="nodes", ansible_play_hosts=["node1"],
                    benchrunner_container_image_dir="/shared/containers", **task["vars"])
    assert early.template(REQUEST)["container"] == {"runtime": "charliecloud", "image": "/shared/containers"}
    # As the job is resolved for the run, but keeping nothing.
    assert early.template(task["ansible.builtin.command"]["argv"]) == [
        "python3", "-m", "benchrunner", "job", "resolve", "-", "--inventory-hosts", '{"node1": "n1"}']
    # Its answer's mount points go to the conversion as KIND:PATH, after the packing options.
    convert = tasks("container_image.yml")[CONVERT_TASK]
    binds = {"rc": 0, "stdout": json.dumps({"mounts": [{"path": "/var/lib/hpcml/results", "kind": "directory"},
                                                       {"path": "/etc/machine-id", "kind": "file"}]})}
    argv = templar(_benchrunner_container_binds=binds, _benchrunner_container_source={"stdout": IMAGE_ID + "\n"},
                   role_path=str(ROLE), benchrunner_container_squash_options="-comp lz4",
                   **convert["vars"]).template(convert["ansible.builtin.command"]["argv"])
    assert argv[1:] == ["charliecloud", "localhost/hpcml-benchrunner:cpu", IMAGE_ID, argv[4], "-comp lz4",
                        "directory:/var/lib/hpcml/results", "file:/etc/machine-id"]
    names = list(tasks("container_image.yml"))
    assert names.index("Stop on a job benchrunner refuses") < names.index(convert["name"])


def test_a_job_benchrunner_refuses_stops_before_the_image_is_converted_with_the_run_s_own_message():
    refused = {"rc": 2, "stderr_lines": ["benchrunner: job document on standard input: model 'x' is not one of a, b"]}
    messages = []
    for file, registered in (("container_image.yml", "_benchrunner_container_binds"), ("resolve.yml", "_benchrunner_resolution")):
        task = tasks(file)["Stop on a job benchrunner refuses"]
        variables = templar(**{registered: refused}, cluster_nodes_group="nodes", ansible_play_hosts=["node1"],
                            hostvars={"localhost": {}, "node1": {"ansible_facts": {"hostname": "n1"}}}, **task["vars"])
        assert variables.evaluate_conditional(task["when"])
        messages.append(variables.template(task["ansible.builtin.fail"]["msg"]))
    assert messages[0] == messages[1] == (
        "The benchmark settings are not valid: model 'x' is not one of a, b. Fix the benchrunner_* variable it names "
        "(workload keys are benchrunner_workload's; env values are strings, so quote them; 1 candidate node(s) in 'nodes').")


# The conversion script, with podman-free stand-ins for the converters that log their command line (and a scratch
# folder outside the cache's work folder) and write a file. podman image mount shows IMAGE_TREE as the image's root.
STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALLS"
[ "${TMPDIR%/*}" = "$CACHE_RUNTIME" ] || echo "TMPDIR $TMPDIR" >> "$CALLS"
out=""
case "$(basename "$0") $1 $2" in
  "podman image mount") echo "$IMAGE_TREE"; exit ;;
  "podman image inspect") printf 'PATH=/opt/hpcml/venv/bin:/usr/bin\\nVIRTUAL_ENV=/opt/hpcml/venv\\n\\n'; exit ;;
  "podman image unmount") exit ;;
esac
case $(basename "$0") in
  enroot) out=$3 ;;
  apptainer) out=$2 ;;
  podman) for a; do [ "$prev" = -o ] && out=$a; prev=$a; done ;;
esac
[ -n "${NO_OUTPUT:-}" ] || echo image > "$out"
"""
# mksquashfs writes what it was given to pack, as squashfs-tools 4.5.1 reads it: each path of the source folder less
# the -e patterns (-wildcards), then each of the -pf pseudo-file's definitions, with its type (d, f, l), then
# ch/environment's content, the output of its definition's command. It ignores a definition whose name the source
# has, or whose parent neither the source nor an earlier definition has: this one fails on it instead.
MKSQUASHFS = r"""#!/usr/bin/env python3
import fnmatch, os, re, subprocess, sys
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as calls:
    calls.write(" ".join(["mksquashfs", *args]) + "\n")
if os.environ.get("NO_OUTPUT"):
    sys.exit()
source, out = args[:2]
excluded = [pattern.split("/") for pattern in args[args.index("-e") + 1:]]


def kept(rel):
    # Each part against the pattern's, a leading dot matched only by one (fnmatch's FNM_PATHNAME|FNM_PERIOD).
    return not any(len(parts) == len(rel) and all(fnmatch.fnmatchcase(name, part) and (name[0] != "." or part[0] == ".")
                                                  for name, part in zip(rel, parts)) for parts in excluded)


paths, environment = {}, ""
for folder, dirs, files in os.walk(source):
    dirs[:] = [name for name in dirs if kept(os.path.relpath(os.path.join(folder, name), source).split("/"))]
    for name in dirs + files:
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, source)
        if kept(rel.split("/")):
            paths[rel] = "l" if os.path.islink(path) else "d" if os.path.isdir(path) else "f"
with open(args[args.index("-pf") + 1]) as pseudo:
    for line in pseudo.read().splitlines():
        name, kind, owner, command = re.fullmatch(r'"((?:[^"\\]|\\.)*)" ([df]) (\d+ root root)(?: (.*))?', line).groups()
        name = re.sub(r"\\(.)", r"\1", name)
        if name in paths or paths.get(os.path.dirname(name), "d" if "/" not in name else None) != "d":
            sys.exit(f"mksquashfs: pseudo-file defines {name}, which the source has or whose parent is missing")
        paths[name] = kind
        if name == "ch/environment":
            environment = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
with open(out, "w") as image:
    image.writelines(f"{kind} ./{path}\n" for path, kind in sorted(paths.items()))
    image.write(environment)
"""
# The lab's mount points (benchrunner.containers.mounts).
MOUNTS = ["directory:/var/lib/hpcml/results", "directory:/dev/shm", "file:/etc/machine-id"]


@pytest.fixture
def converters(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in (("mksquashfs", MKSQUASHFS), ("enroot", STAND_IN), ("apptainer", STAND_IN), ("podman", STAND_IN)):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    # A Debian-like image: /bin a link into /usr, /etc without a machine ID, a device in /dev.
    tree = tmp_path / "image"
    for folder in ("usr/bin", "etc", "dev", "var/lib"):
        (tree / folder).mkdir(parents=True)
    (tree / "bin").symlink_to("usr/bin")
    (tree / "etc" / "hosts").write_text("")
    (tree / "dev" / "console").write_text("")
    (tree / "dev" / ".lxc").write_text("")

    def convert(runtime: str, *mounts: str, options: str = "",
                **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
        done = subprocess.run([str(CONVERT), runtime, "localhost/hpcml-benchrunner:cpu", IMAGE_ID, str(tmp_path / "cache"),
                               options, *mounts], capture_output=True, text=True, check=False,
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls),
                                   "CACHE_RUNTIME": str(tmp_path / "cache" / runtime), "IMAGE_TREE": str(tree), **env})
        lines = calls.read_text().splitlines() if calls.exists() else []
        calls.unlink(missing_ok=True)
        return done, lines

    return convert, tmp_path / "cache", tree


CHARLIECLOUD = ["podman image mount {id}",
                "podman image inspect --format {{{{range .Config.Env}}}}{{{{println .}}}}{{{{end}}}} {id}",
                "mksquashfs {tree} {work}/image.sqfs -b 65536 -noappend -all-root -no-xattrs -root-mode 755 "
                "-pf {work}/pseudo{options} -wildcards -e dev/* dev/.* ch/environment",
                "podman image unmount {id}"]


@pytest.mark.parametrize(("runtime", "name", "commands"), [
    ("charliecloud", rf"{IMAGE_ID}-[0-9a-f]{{16}}\.sqfs", CHARLIECLOUD),
    ("enroot", rf"{IMAGE_ID}\.sqsh", ["enroot import -o {work}/image.sqsh podman://localhost/hpcml-benchrunner:cpu"]),
    ("apptainer", rf"{IMAGE_ID}\.sif", ["podman save --format docker-archive -o {work}/image.tar localhost/hpcml-benchrunner:cpu",
                                        "apptainer build {work}/image.sif docker-archive:{work}/image.tar"]),
])
def test_the_image_is_converted_once_per_runtime_and_image_id(converters, runtime, name, commands):
    convert, cache, tree = converters
    done, calls = convert(runtime, *MOUNTS)
    assert done.returncode == 0, done.stderr
    out = cache / runtime / json.loads(done.stdout)["path"].rsplit("/", 1)[-1]
    assert re.fullmatch(name, out.name)
    digest = subprocess.run(["sha256sum", str(out)], capture_output=True, text=True, check=True).stdout.split()[0]
    assert json.loads(done.stdout) == {"path": str(out), "digest": f"sha256:{digest}", "changed": True}
    # The converter writes into a work folder beside the cache's files, moved in only once it is done.
    work = re.search(rf"{re.escape(str(cache / runtime))}/\.converting\.\w+", "\n".join(calls)).group(0)
    assert calls == [c.format(work=work, id=IMAGE_ID, tree=tree, options="") for c in commands]
    # Converted work folders do not stay behind; the same image ID again converts nothing.
    assert sorted(p.name for p in (cache / runtime).iterdir()) == [out.name, f"{out.name}.sha256"]
    again, calls = convert(runtime, *MOUNTS)
    assert again.returncode == 0 and calls == []
    assert json.loads(again.stdout) == {"path": str(out), "digest": f"sha256:{digest}", "changed": False}


def test_charliecloud_s_image_holds_every_mount_point_of_the_job_and_ch_convert_s(converters):
    convert, _, tree = converters
    (tree / "etc" / "machine-id").write_text("kept\n")
    # Two binds under one folder the image lacks, one with a name the pseudo-file quotes.
    odd = '/data/a "b"\\c'
    done, _ = convert("charliecloud", *MOUNTS, "directory:/data/cxr", f"file:{odd}")
    assert done.returncode == 0, done.stderr
    packed = open(json.loads(done.stdout)["path"]).read().splitlines()
    made = {line.split(" ", 1)[1]: line[0] for line in packed if line[:2] in ("d ", "f ", "l ")}
    # The job's binds (the machine ID the image had is left as it was), ch-convert 0.31's mount points beside the
    # image's own (its /bin link kept), /dev emptied, and the image's environment as ch/environment.
    binds = ("./var/lib/hpcml/results", "./dev/shm", "./etc/machine-id", "./data", "./data/cxr", f".{odd}")
    assert {p: made.get(p) for p in binds} == dict(zip(binds, "ddfddf", strict=True))
    assert (made["./bin"], made["./mnt/9"], made["./proc"], made["./etc/resolv.conf"]) == ("l", "d", "d", "f")
    assert "./dev/console" not in made and "./dev/.lxc" not in made and made["./dev"] == "d"
    assert packed[-3:] == ["PATH=/opt/hpcml/venv/bin:/usr/bin", "VIRTUAL_ENV=/opt/hpcml/venv", ""]
    assert made["./ch/environment"] == "f"


def test_the_packing_options_and_the_mount_points_are_part_of_the_image_s_name(converters):
    convert, cache, _ = converters
    first, _ = convert("charliecloud", *MOUNTS)
    lz4, calls = convert("charliecloud", *MOUNTS, options="-comp lz4")
    assert lz4.returncode == 0, lz4.stderr
    assert " -noappend -all-root -no-xattrs -root-mode 755 -pf " in calls[2] and "/pseudo -comp lz4 -wildcards -e " in calls[2]
    other, _ = convert("charliecloud", "directory:/scratch/results", *MOUNTS[1:])
    # The same mount points in another order are the same image.
    same, calls = convert("charliecloud", *reversed(MOUNTS))
    paths = [json.loads(done.stdout)["path"] for done in (first, lz4, other, same)]
    assert len(set(paths[:3])) == 3 and paths[3] == paths[0] and calls == []
    assert len(list((cache / "charliecloud").iterdir())) == 6


@pytest.mark.parametrize(("mounts", "make", "why"), [
    (["directory:/srv/results"], lambda tree: (tree / "srv").symlink_to("/tmp"), "/srv is a link in the image"),
    (["directory:/etc/hosts/results"], lambda tree: None, "/etc/hosts is not a directory in the image"),
    (["file:/etc"], lambda tree: None, "it is not a file in the image"),
    (["directory:/var/../srv"], lambda tree: None, "has a '..' part"),
    # Against what an earlier bind made, as against the image.
    (["file:/data/id", "directory:/data/id/sub"], lambda tree: None, "/data/id is not a directory in the image"),
    (["directory:/data/id", "file:/data/id"], lambda tree: None, "it is not a file in the image"),
])
def test_a_mount_point_the_image_cannot_hold_fails_and_caches_nothing(converters, mounts, make, why):
    convert, cache, tree = converters
    make(tree)
    done, calls = convert("charliecloud", *MOUNTS, *mounts)
    assert done.returncode == 1
    assert done.stderr.startswith("convert-image.sh: ") and why in done.stderr and done.stdout == ""
    assert not any(c.startswith("mksquashfs") for c in calls) and calls[-1] == f"podman image unmount {IMAGE_ID}"
    assert list((cache / "charliecloud").iterdir()) == []
    done, _ = convert("charliecloud", "/var/lib/hpcml/results")
    assert done.returncode == 2 and "mount point '/var/lib/hpcml/results' is not KIND:/PATH" in done.stderr


def test_a_converter_that_writes_nothing_fails_and_caches_nothing(converters):
    convert, cache, _ = converters
    done, _ = convert("charliecloud", *MOUNTS, NO_OUTPUT="1")
    assert done.returncode == 1 and "charliecloud's converter left no image at" in done.stderr
    assert list((cache / "charliecloud").iterdir()) == []
    done, _ = convert("docker")
    assert done.returncode == 2 and "unknown runtime 'docker' (apptainer, charliecloud, enroot)" in done.stderr


def test_the_lab_puts_container_images_in_the_shared_folder_its_nodes_mount():
    lab = LOADER.load_from_file(str(PROJECT / "roles" / "lab" / "defaults" / "main.yml"))
    inventory = LOADER.load_from_file(str(PROJECT / "inventory" / "lab" / "group_vars" / "all.yml"))
    assert inventory["benchrunner_container_image_shared"] is True
    assert inventory["benchrunner_container_image_dir"].startswith(lab["lab_shared_dir"] + "/")
