"""python_env's supply chain: hash locks, the Horovod wheel's recorded sha256, index credentials, CUDA wheels, PyTorch's
CPU and CUDA builds and the driver the CUDA build needs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import urllib.parse
import zipfile
from pathlib import Path

import http_stub
import pytest
import yaml
from playbook_run import play, role_tasks

from unit_paths import PROJECT

ROLE = PROJECT / "roles" / "python_env"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
# The role reads the shared values (roles/cluster) as every play gives them to it.
SHARED_VALUES = [{"name": f"shared {part}", "ansible.builtin.include_vars": str(ROLE.parent / "cluster" / part / "main.yml")}
                 for part in ("defaults", "vars")]
LOCKS = ROLE / "files" / "locks" / f"tensorflow-{DEFAULTS['python_env_tensorflow_version']}"
TORCH = DEFAULTS["python_env_torch_version"]
TORCH_LOCKS = ROLE / "files" / "locks" / f"torch-{TORCH}"
# The CPU wheel as the machine image carries it (pip's find-links); its sha256 is the one PyTorch's CPU index
# publishes for torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl.
TORCH_CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
TORCH_CPU_SHA256 = "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"
# torch 2.13.0's METADATA (both builds): Requires-Dist without markers, and what those need in turn.
TORCH_REQUIRES = {"filelock", "typing-extensions", "setuptools", "sympy", "networkx", "jinja2", "fsspec"}
TORCH_CPU_CLOSURE = {"torch", *TORCH_REQUIRES, "mpmath", "markupsafe"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) --hash=sha256:([0-9a-f]{64})  # (\S+)$")
# tensorflow-2.15.1's METADATA (the cp311 manylinux wheel on PyPI): Requires-Dist ...; extra == 'and-cuda'.
# The build host's facts the role reads (a Debian 12 node).
BUILD_FACTS = {"distribution": "Debian", "distribution_major_version": "12", "architecture": "x86_64",
               "python": {"version": {"major": 3, "minor": 11}}}
TF_2_15_1_AND_CUDA = {
    "nvidia-cublas-cu12": "12.2.5.6", "nvidia-cuda-cupti-cu12": "12.2.142", "nvidia-cuda-nvcc-cu12": "12.2.140",
    "nvidia-cuda-nvrtc-cu12": "12.2.140", "nvidia-cuda-runtime-cu12": "12.2.140", "nvidia-cudnn-cu12": "8.9.4.25",
    "nvidia-cufft-cu12": "11.0.8.103", "nvidia-curand-cu12": "10.3.3.141", "nvidia-cusolver-cu12": "11.5.2.141",
    "nvidia-cusparse-cu12": "12.1.2.141", "nvidia-nccl-cu12": "2.16.5", "nvidia-nvjitlink-cu12": "12.2.140",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock(path: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (version, sha256, file) of every pin; anything but comments and hashed pins fails."""
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: not a hashed pin: {line!r}"
        found[canonical(match.group(1))] = match.group(2, 3, 4)
    assert found, f"{path.name} pins nothing"
    return found


def constraints() -> dict[str, str]:
    text = (ROLE / "files" / "constraints" / f"tensorflow-{DEFAULTS['python_env_tensorflow_version']}.txt").read_text()
    pins = dict(line.split("==") for line in text.splitlines() if line and not line.startswith("#"))
    assert len(pins) > 40
    return {canonical(name): version for name, version in pins.items()}


def test_the_lock_pins_every_package_of_the_constraints_and_the_build_tools():
    locked = lock(LOCKS / "cp311-x86_64.txt")
    wanted = {n: v for n, v in constraints().items() if n != "horovod"}
    wanted.update((canonical(n), v) for n, v in (r.split("==") for r in DEFAULTS["python_env_build_requirements"]))
    assert {n: locked[n][0] for n in locked} == wanted
    for name, (version, _, file) in locked.items():
        # the file pip picked for cp311 on manylinux x86_64 is of this version
        assert canonical(file).startswith(f"{name}-{canonical(version)}-"), file
        assert file.endswith(".whl") and re.search(r"(any|manylinux\w*_x86_64)\.whl$", file), file


def test_the_cuda_lock_is_what_tensorflow_and_cuda_pins():
    locked = lock(LOCKS / "cp311-x86_64-cuda.txt")
    assert {n: v[0] for n, v in locked.items()} == TF_2_15_1_AND_CUDA
    assert not set(locked) & set(lock(LOCKS / "cp311-x86_64.txt"))


def test_horovods_source_is_pinned():
    assert lock(LOCKS / f"horovod-{DEFAULTS['python_env_horovod_version']}.txt") == {
        "horovod": (DEFAULTS["python_env_horovod_version"],
                    "92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0", "horovod-0.28.1.tar.gz")}


def test_a_hand_edited_lock_line_is_refused(tmp_path):
    path = tmp_path / "lock.txt"
    path.write_text("numpy==1.26.4\n")
    with pytest.raises(AssertionError, match="not a hashed pin"):
        lock(path)


# Task templates, rendered by Ansible with the role's defaults and vars, as a node with or without GPUs sees them.
def task(file: str, name: str) -> dict:
    found = [t for t in yaml.safe_load((ROLE / "tasks" / file).read_text()) if t["name"] == name]
    if not found:
        found = [b for t in yaml.safe_load((ROLE / "tasks" / file).read_text()) for b in t.get("block", [])
                 if b["name"] == name]
    assert len(found) == 1, name
    return found[0]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    templates = {
        "cuda_fact": task("10-wheelhouse.yml", "Note whether this node installs TensorFlow's CUDA libraries")[
            "ansible.builtin.set_fact"]["_python_env_cuda"],
        "download": task("10-wheelhouse.yml", "Download binary wheels for {{ _python_env_tag }}")[
            "ansible.builtin.command"]["argv"],
        "source": task("10-wheelhouse.yml", "Download the Horovod source distribution")["ansible.builtin.command"]["argv"],
        "sync": task("30-install.yml", "Copy the wheelhouse to the node")["ansible.posix.synchronize"]["rsync_opts"],
        "requirements": task("30-install.yml", "Write the environment's requirements")["ansible.builtin.copy"]["content"],
        "horovod_pin": task("30-install.yml", "Pin the verified Horovod wheel")["ansible.builtin.copy"]["content"],
        "install": task("30-install.yml", "Install TensorFlow, Horovod and PyTorch offline")["ansible.builtin.command"]["argv"],
        "pins": task("30-install.yml", "Write the environment's pins")["ansible.builtin.copy"]["content"],
        "torch_download": task("10-wheelhouse.yml", "Download PyTorch's wheels for {{ _python_env_tag }}")[
            "ansible.builtin.command"]["argv"],
        "build_sync": task("20-horovod-wheel.yml", "Copy the wheelhouse to the build host")["ansible.posix.synchronize"][
            "rsync_opts"],
        "build": task("20-horovod-wheel.yml", "Compile the Horovod wheel (6 minutes on 2 cores) for {{ _python_env_tag }}")[
            "ansible.builtin.command"]["argv"],
    }
    cases = {"cpu": {"gpu_steps": "skip"}, "gpu": {"gpu_steps": "run"}, "image": {"gpu_steps": "image"}}
    tasks = [*SHARED_VALUES, {"name": "role defaults", "ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
             {"name": "role vars", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")}]
    for case, hardware in cases.items():
        tasks.append({"name": case, "vars": {"node_facts_hardware": hardware}, "ansible.builtin.set_fact": {
            f"_out_{case}": {"cuda_wheels": "{{ python_env_cuda_wheels }}", "cuda_fact": templates["cuda_fact"]}}})
    # The node's own steps take _python_env_cuda as 10-wheelhouse.yml set it (from python_env_cuda_wheels).
    # set_fact outranks the role defaults include_vars read, task vars do not.
    for case in ("cpu", "gpu", "gpu_without_torch"):
        gpu = case.startswith("gpu")
        tasks.append({"name": f"{case} torch",
                      "ansible.builtin.set_fact": {"python_env_torch_enabled": case != "gpu_without_torch"}})
        tasks.append({"name": f"{case} steps", "vars": {
            "_python_env_cuda": gpu, "node_facts_hardware": {"gpu_steps": "run" if gpu else "skip"}},
            "ansible.builtin.set_fact": {
                f"_steps_{case}": {k: templates[k] for k in ("sync", "requirements", "horovod_pin", "install", "pins")}}})
    tasks.append({"name": "torch again", "ansible.builtin.set_fact": {"python_env_torch_enabled": True}})
    # Whether a Horovod already installed is replaced by the verified wheel.
    replace = "{{ " + task("30-install.yml", "Replace a Horovod installed from another wheel")["when"] + " }}"
    installs = {"older": ("a" * 64, "Requirement already satisfied: horovod==0.28.1"),
                "same": ("ab" * 32, "Requirement already satisfied: horovod==0.28.1"),
                "unrecorded": (None, "Requirement already satisfied: horovod==0.28.1"),
                "fresh": (None, "Successfully installed absl-py-2.5.1 horovod-0.28.1 numpy-1.26.4")}
    for case, (recorded, stdout) in installs.items():
        tasks.append({"name": f"replace {case}", "ansible.builtin.set_fact": {f"_replace_{case}": replace}, "vars": {
            "_python_env_pip": {"stat": {"exists": True}}, "_python_env_install": {"stdout": stdout},
            "ansible_local": {"hpcml_python_env": {"horovod_sha256": recorded} if recorded else {}}}})
    tasks.append({"name": "no node facts", "ansible.builtin.set_fact": {"_out_none": "{{ python_env_cuda_wheels }}"}})
    tasks.append({"name": "downloads", "vars": {"item": "/w/lock-torch-cpu.txt"}, "ansible.builtin.set_fact": {
        "_downloads": {k: templates[k] for k in ("download", "source", "build", "torch_download", "build_sync")}}})
    tasks.append({"name": "write", "ansible.builtin.copy": {"dest": str(tmp / "out.json"), "mode": "0600", "content": (
        "{{ {'cases': {'cpu': _out_cpu, 'gpu': _out_gpu, 'image': _out_image, 'none': _out_none},"
        " 'steps': {'cpu': _steps_cpu, 'gpu': _steps_gpu, 'gpu_without_torch': _steps_gpu_without_torch},"
        " 'downloads': _downloads, 'replace': {'older': _replace_older,"
        " 'same': _replace_same, 'unrecorded': _replace_unrecorded, 'fresh': _replace_fresh}} | to_json }}")}})
    secret = "s3cret-in-url"
    run = play(tmp, tasks, extravars={
        "role_path": str(ROLE), "_python_env_build_facts": BUILD_FACTS, "_python_env_gpu_flavour": "cpu",
        "_python_env_horovod_sha256": "ab" * 32,
        "_python_env_horovod_file": "horovod-0.28.1-cp311-cp311-linux_x86_64.whl",
        "python_env_pip_index_url": f"https://user:{secret}@mirror.example/simple",
        "_python_env_locks": {"results": [{"dest": "/w/lock.txt", "checksum": "1"},
                                          {"dest": "/w/lock-horovod-source.txt", "checksum": "2"},
                                          {"dest": "/w/lock-torch-cpu.txt", "checksum": "3"}]}})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = json.loads((tmp / "out.json").read_text())
    out["secret"] = secret
    return out


def test_gpu_nodes_and_images_take_the_cuda_wheels_cpu_nodes_do_not(rendered):
    cases = rendered["cases"]
    assert {c: (v["cuda_wheels"], v["cuda_fact"]) for c, v in cases.items() if c != "none"} == {
        "cpu": (False, False), "gpu": (True, True), "image": (True, True)}
    assert cases["none"] is False  # python_env without the node layer: no GPU known


def pinned(text: str) -> dict[str, tuple[str, str, str]]:
    """name -> (version, sha256, file) of a rendered list of pins, each package once."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    found = {}
    for line in lines:
        match = PIN.match(line)
        assert match, f"not a hashed pin: {line!r}"
        assert canonical(match.group(1)) not in found, f"pinned twice: {match.group(1)}"
        found[canonical(match.group(1))] = match.group(2, 3, 4)
    return found


def test_nodes_install_only_hashed_pins_each_package_once(rendered):
    steps = rendered["steps"]
    node_dir = "/var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu"
    for case in steps.values():
        argv = case["install"]
        assert argv[1:3] == ["install", "--disable-pip-version-check"]
        assert {"--require-hashes", "--no-deps", "--no-index"} <= set(argv)
        assert argv[argv.index("--find-links") + 1] == node_dir
        assert case["horovod_pin"] == (
            f"horovod==0.28.1 --hash=sha256:{'ab' * 32}  # horovod-0.28.1-cp311-cp311-linux_x86_64.whl\n")
        assert case["requirements"].splitlines() == [
            "--requirement /var/cache/hpcml/wheelhouse/pins-debian12-cp311-x86_64-cpu.txt",
            "--requirement /var/cache/hpcml/wheelhouse/horovod-debian12-cp311-x86_64-cpu.txt"]
        pinned(case["pins"])


def test_a_cpu_node_gets_tensorflow_and_the_cpu_build_of_torch_with_torchs_setuptools(rendered):
    pins = pinned(rendered["steps"]["cpu"]["pins"])
    tensorflow, torch = lock(LOCKS / "cp311-x86_64.txt"), lock(TORCH_LOCKS / "cp311-x86_64-cpu.txt")
    assert pins == {**{n: v for n, v in tensorflow.items() if n not in torch}, **torch}
    assert pins["torch"][0] == f"{TORCH}+cpu" and pins["tensorflow"][0] == "2.15.1"
    # The one pin the locks disagree on: Horovod's build keeps 69.5.1 in its own venv, the environment takes torch's.
    assert tensorflow["setuptools"][0] == "69.5.1" and pins["setuptools"][0] == "81.0.0"
    assert not [n for n in pins if n.startswith(("nvidia-", "cuda-")) or n == "triton"]


def test_a_gpu_node_gets_both_cuda_stacks_and_one_nccl(rendered):
    pins = pinned(rendered["steps"]["gpu"]["pins"])
    tensorflow_cuda, torch = lock(LOCKS / "cp311-x86_64-cuda.txt"), lock(TORCH_LOCKS / "cp311-x86_64-cuda.txt")
    assert pins["torch"][0] == TORCH and pins["nvidia-cuda-runtime"][0].startswith("13.")
    assert pins["nvidia-cudnn-cu12"][0] == "8.9.4.25" and pins["nvidia-cudnn-cu13"] == torch["nvidia-cudnn-cu13"]
    # nvidia-nccl-cu12 and -cu13 both install nvidia/nccl/lib/libnccl.so.2: torch requires its own.
    assert "nvidia-nccl-cu12" not in pins and pins["nvidia-nccl-cu13"] == torch["nvidia-nccl-cu13"]
    assert set(pins) == (set(lock(LOCKS / "cp311-x86_64.txt")) | set(tensorflow_cuda) | set(torch)) - {"nvidia-nccl-cu12"}
    without = pinned(rendered["steps"]["gpu_without_torch"]["pins"])
    assert without == {**lock(LOCKS / "cp311-x86_64.txt"), **tensorflow_cuda}


def test_each_node_is_sent_the_wheels_of_its_own_pins_only(rendered):
    cpu, gpu = rendered["steps"]["cpu"]["sync"], rendered["steps"]["gpu"]["sync"]
    cpu_files = {v[2] for v in pinned(rendered["steps"]["cpu"]["pins"]).values()}
    gpu_files = {v[2] for v in pinned(rendered["steps"]["gpu"]["pins"]).values()}
    for sync, files in ((cpu, cpu_files), (gpu, gpu_files)):
        assert not [f for f in files if f"--exclude={f}" in sync]
    assert "--exclude=nvidia_*" in cpu and "--exclude=nvidia_*" not in gpu
    assert f"--exclude=torch-{TORCH}-cp311-cp311-manylinux_2_28_x86_64.whl" in cpu
    assert "--exclude=lock-torch-cuda.txt" in cpu and "--exclude=lock-torch-cpu.txt" not in cpu
    assert f"--exclude=torch-{TORCH}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in gpu
    assert "--exclude=lock-torch-cpu.txt" in gpu and "--exclude=lock-torch-cuda.txt" not in gpu
    assert "--exclude=nvidia_nccl_cu12-2.16.5-py3-none-manylinux1_x86_64.whl" in gpu
    # Wheels both locks share (MarkupSafe) go to every node.
    assert not [a for a in cpu + gpu if "markupsafe" in a]


def test_an_installed_horovod_from_another_wheel_is_replaced_once(rendered):
    assert rendered["replace"] == {"older": True, "same": False, "unrecorded": True, "fresh": False}


def test_downloads_and_the_build_check_hashes_and_carry_no_credentials(rendered):
    downloads = {k: v for k, v in rendered["downloads"].items() if k != "build_sync"}
    for argv in downloads.values():
        assert {"--require-hashes", "--no-deps"} <= set(argv)
        assert not any(rendered["secret"] in a or "index-url" in a for a in argv)
    # TensorFlow's locks in one call, each of torch's builds in its own: their setuptools and torch pins differ.
    assert [a for a in downloads["download"] if a.startswith("--requirement")] == ["--requirement=/w/lock.txt"]
    assert [a for a in downloads["torch_download"] if a.startswith("--requirement")] == ["--requirement=/w/lock-torch-cpu.txt"]
    for name in ("download", "torch_download"):
        assert downloads[name][downloads[name].index("--python-version") + 1] == "3.11"
    torch = downloads["torch_download"]
    # The wheelhouse is a source: the CPU wheel fetched there on its own before pip runs.
    assert torch[torch.index("--find-links") + 1].endswith("/wheelhouse/debian12-cp311-x86_64-cpu")
    # torch's CUDA wheels name glibc baselines pip does not widen to from manylinux_2_28 (cuDNN: 2_27, NCCL: 2_18).
    assert {f"--platform=manylinux{tag}_x86_64" for tag in ("_2_27", "_2_18", "2014")} <= set(torch)
    assert "--no-binary=:all:" in downloads["source"]
    assert "--no-binary=horovod" in downloads["build"]  # never a wheel an earlier install left on the build host
    # The build host compiles Horovod in TensorFlow's environment: none of torch's own wheels are copied there.
    build_sync = rendered["downloads"]["build_sync"]
    assert f"--exclude=torch-{TORCH}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in build_sync
    assert not [a for a in build_sync if "markupsafe" in a or "typing_extensions" in a]


# Horovod 0.28.1's setup.py configures CMake with -DCMAKE_BUILD_TYPE=RelWithDebInfo, and its CMakeLists.txt raises that
# type's -O2 to -O3: the same two steps, on one source file.
HOROVOD_LIKE_PROJECT = """cmake_minimum_required(VERSION 3.13)
project(horovod_like CXX)
string(REPLACE "-O2" "-O3" CMAKE_CXX_FLAGS_RELWITHDEBINFO "${CMAKE_CXX_FLAGS_RELWITHDEBINFO}")
add_library(ops SHARED ops.cc)
"""


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("c++")), reason="needs CMake and a C++ compiler")
def test_without_debug_information_horovod_compiles_at_o3_without_g(tmp_path):
    build_dir = tmp_path / "build-host"
    tasks = [*SHARED_VALUES, {"name": "role defaults", "ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
             {"name": "role vars", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")}]
    for debug_info in (True, False):
        tasks += [{"name": f"debug info {debug_info}",
                   "ansible.builtin.set_fact": {"python_env_horovod_debug_info": debug_info}},
                  {"name": f"env {debug_info}",
                   "ansible.builtin.set_fact": {f"_env_{debug_info}": "{{ _python_env_build_env }}"}}]
    tasks.append({"name": "write", "ansible.builtin.copy": {"dest": str(tmp_path / "out.json"), "mode": "0600",
                                                            "content": "{{ [_env_True, _env_False] | to_json }}"}})
    run = play(tmp_path, tasks, extravars={"role_path": str(ROLE), "_python_env_build_facts": BUILD_FACTS,
                                           "_python_env_gpu_flavour": "cpu", "python_env_build_dir": str(build_dir)})
    assert run.returncode == 0, run.stdout[-3000:]
    with_debug, without = json.loads((tmp_path / "out.json").read_text())
    assert "CMAKE_TOOLCHAIN_FILE" not in with_debug
    # Where the build's copy task puts the role's file, inside the build tree the role removes afterwards.
    written = task("20-horovod-wheel.yml", "Write the CMake toolchain file that leaves debug information out of the compile")
    assert written["when"] == "not python_env_horovod_debug_info"
    toolchain = Path(without.pop("CMAKE_TOOLCHAIN_FILE"))
    assert toolchain.parent == build_dir and without == with_debug
    build_dir.mkdir()
    shutil.copy(ROLE / "files" / written["ansible.builtin.copy"]["src"], toolchain)

    source = tmp_path / "source"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(HOROVOD_LIKE_PROJECT)
    (source / "ops.cc").write_text("int op() { return 1; }\n")
    flags = {}
    for case, extra in {"debug info": {}, "none": {"CMAKE_TOOLCHAIN_FILE": str(toolchain)}}.items():
        out = tmp_path / case
        env = {k: v for k, v in os.environ.items() if k != "CMAKE_TOOLCHAIN_FILE"} | extra
        subprocess.run(["cmake", "-S", str(source), "-B", str(out), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], env=env,
                       capture_output=True, check=True)
        made = (out / "CMakeFiles" / "ops.dir" / "flags.make").read_text()
        flags[case] = re.search(r"^CXX_FLAGS = (.*)$", made, re.M).group(1).split()
    assert [f for f in flags["debug info"] if f.startswith(("-O", "-g"))] == ["-O3", "-g"]
    assert [f for f in flags["none"] if f.startswith(("-O", "-g"))] == ["-O3"]
    assert "-DNDEBUG" in flags["none"]


# PyTorch's locks: hashed, the right build for each kind of node, and one environment with TensorFlow's.
def test_every_line_of_the_torch_locks_is_a_hashed_pin():
    for path in sorted(TORCH_LOCKS.glob("*.txt")):
        for name, (version, _, file) in lock(path).items():
            assert canonical(file).startswith(f"{name}-{canonical(version)}-"), file
            assert file.endswith(".whl") and re.search(r"(any|manylinux\w*_x86_64)\.whl$", file), file
    assert sorted(p.name for p in TORCH_LOCKS.glob("*.txt")) == ["cp311-x86_64-cpu.txt", "cp311-x86_64-cuda.txt"]


def test_the_cpu_lock_pins_the_cpu_build_and_nothing_of_cuda():
    locked = lock(TORCH_LOCKS / "cp311-x86_64-cpu.txt")
    assert locked["torch"] == (f"{TORCH}+cpu", TORCH_CPU_SHA256, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert set(locked) == TORCH_CPU_CLOSURE
    assert not [n for n in locked if n.startswith(("nvidia-", "cuda-")) or n == "triton"]


def test_the_cpu_wheel_pinned_is_the_machine_images():
    if not TORCH_CPU_WHEEL.is_file():
        pytest.skip(f"{TORCH_CPU_WHEEL} is not on this machine")
    assert hashlib.sha256(TORCH_CPU_WHEEL.read_bytes()).hexdigest() == TORCH_CPU_SHA256


def test_the_cuda_lock_is_pypis_cuda_build_with_the_cpu_locks_other_pins():
    cpu, cuda = lock(TORCH_LOCKS / "cp311-x86_64-cpu.txt"), lock(TORCH_LOCKS / "cp311-x86_64-cuda.txt")
    assert cuda["torch"][0] == TORCH and cuda["torch"][2] == f"torch-{TORCH}-cp311-cp311-manylinux_2_28_x86_64.whl"
    # torch 2.13.0's METADATA: cuda-toolkit[...]==13.0.3, cuDNN 9.20.0.48, NCCL 2.29.7, triton 3.7.1.
    assert {n: cuda[n][0] for n in ("cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "triton")} == {
        "cuda-toolkit": "13.0.3.0", "nvidia-cudnn-cu13": "9.20.0.48", "nvidia-nccl-cu13": "2.29.7", "triton": "3.7.1"}
    assert cuda["nvidia-cuda-runtime"][0].startswith("13.0.")
    assert {n: v for n, v in cuda.items() if n in cpu and n != "torch"} == {n: v for n, v in cpu.items() if n != "torch"}


def test_torch_and_tensorflow_share_versions_but_setuptools():
    tensorflow = lock(LOCKS / "cp311-x86_64.txt")
    for path in TORCH_LOCKS.glob("*.txt"):
        torch = lock(path)
        differ = {n for n in set(torch) & set(tensorflow) if torch[n][0] != tensorflow[n][0]}
        assert differ == {"setuptools"}, path.name
        # torch needs setuptools>=77.0.3; TensorBoard 2.15 imports pkg_resources, gone from setuptools 82.
        assert 77 <= int(torch["setuptools"][0].split(".")[0]) < 82


# The Horovod wheel's recorded sha256, checked by the role's own tasks: first as built, then after a change.
def test_a_tampered_horovod_wheel_fails_naming_the_file_and_both_hashes(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheel = wheelhouse / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    built, tampered = b"PK built by the role", b"PK built by someone else"
    wheel.write_bytes(built)
    recorded = hashlib.sha256(built).hexdigest()
    Path(f"{wheel}.sha256").write_text(f"{recorded}  {wheel.name}\n")
    tasks = [*role_tasks("python_env", "horovod-verify"),
             {"name": "passed as built", "ansible.builtin.assert": {"that": f"_python_env_horovod_sha256 == '{recorded}'"}},
             {"name": "tamper", "ansible.builtin.copy": {"dest": str(wheel), "content": tampered.decode(), "mode": "0644"}},
             *role_tasks("python_env", "horovod-verify")]
    run = play(tmp_path, tasks, extravars={"_python_env_controller_dir": str(wheelhouse)})
    text = " ".join(run.stdout.split())
    assert run.returncode != 0 and run.failed == 1 and run.changed == 1, run.stdout[-3000:]
    assert "passed as built" in text and "All assertions passed" in text
    assert f"{wheel} has sha256 {hashlib.sha256(tampered).hexdigest()}, but {wheel}.sha256 recorded '{recorded} " in text


def test_a_wheel_cached_before_hashes_were_recorded_is_removed_to_be_built_again(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheel = wheelhouse / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"PK from an older run")
    # Another node builds: this one only sees the removal, then finds no wheel to verify.
    run = play(tmp_path, role_tasks("python_env", "20-horovod-wheel"), extravars={
        "_python_env_controller_dir": str(wheelhouse), "python_env_build_host": "node002"})
    text = " ".join(run.stdout.split())
    assert not wheel.exists()
    assert f"{wheel.name} has no {wheel.name}.sha256" in text
    assert run.failed == 1 and f"Expected one Horovod 0.28.1 wheel in {wheelhouse}, found []" in text


def test_preflight_refuses_credentials_in_the_download_options_without_printing_them(tmp_path):
    tasks = [*SHARED_VALUES, {"name": "role defaults", "ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
             {"name": "role vars", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
             {"name": "preflight", "ansible.builtin.include_tasks": str(ROLE / "tasks" / "00-preflight.yml")}]
    run = play(tmp_path, tasks, extravars={"role_path": str(ROLE), "_python_env_build_facts": BUILD_FACTS,
                                           "python_env_pip_download_args": ["--index-url", "https://u:p4ss-x@mirror/simple"]})
    assert run.refused("python_env_pip_download_args holds a URL with user information")
    assert "p4ss-x" not in run.stdout


# Index credentials: the role's download steps, against a local index that wants them.
def tiny_wheel(name: str, version: str = "1.0") -> bytes:
    buffer = io.BytesIO()
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return buffer.getvalue()


def tiny_sdist(name: str) -> bytes:
    """A source distribution whose in-tree build backend needs nothing from an index to give its metadata."""
    backend = ("def prepare_metadata_for_build_wheel(directory, config_settings=None):\n"
               "    import os\n"
               f"    info = os.path.join(directory, '{name}-1.0.dist-info')\n"
               "    os.makedirs(info)\n"
               "    with open(os.path.join(info, 'METADATA'), 'w') as f:\n"
               f"        f.write('Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n')\n"
               f"    return '{name}-1.0.dist-info'\n\n"
               "def get_requires_for_build_wheel(config_settings=None):\n    return []\n\n"
               "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
               "    raise NotImplementedError\n")
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
             f'[project]\nname = "{name}"\nversion = "1.0"\n',
             "backend.py": backend, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(f"{name}-1.0/{path}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def test_index_credentials_reach_pip_but_no_command_line_or_log(tmp_path):
    wheel_name, sdist_name = "hpcml_locktest_wheel", "hpcml_locktest_source"
    files = {f"{wheel_name}-1.0-py3-none-any.whl": tiny_wheel(wheel_name), f"{sdist_name}-1.0.tar.gz": tiny_sdist(sdist_name)}
    seen = []

    class Index(http_stub.Handler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            project = self.path.strip("/").split("/")
            if project[:1] == ["simple"] and len(project) == 2:
                links = "".join(f'<a href="/files/{f}#sha256={hashlib.sha256(d).hexdigest()}">{f}</a>'
                                for f, d in files.items() if canonical(f).startswith(canonical(project[1]) + "-"))
                body, kind = f"<html><body>{links}</body></html>".encode(), "text/html"
            elif project[:1] == ["files"] and project[-1] in files:
                body, kind = files[project[-1]], "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_body(body, kind)

    secret = "n0t-in-any-log-7d1f"
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "cp311-x86_64.txt").write_text("".join(
        f"{n}==1.0 --hash=sha256:{hashlib.sha256(files[f]).hexdigest()}\n"
        for n, f in [(wheel_name, f"{wheel_name}-1.0-py3-none-any.whl")]))
    (locks / "horovod-0.28.1.txt").write_text(
        f"{sdist_name}==1.0 --hash=sha256:{hashlib.sha256(files[f'{sdist_name}-1.0.tar.gz']).hexdigest()}\n")
    wheelhouse = tmp_path / "wheelhouse"
    with http_stub.serving(Index) as port:
        run = play(tmp_path, role_tasks("python_env", "10-wheelhouse"), extravars={
            "_python_env_build_facts": BUILD_FACTS, "python_env_wheelhouse": str(wheelhouse),
            "python_env_lock_dir": str(locks), "python_env_horovod_gpu": "false", "python_env_torch_enabled": False,
            "python_env_pip_index_url": f"http://hpcml:{secret}@127.0.0.1:{port}/simple/"},
            verbosity=3)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    downloaded = sorted(p.name for p in wheelhouse.glob("*/*") if p.name in files)
    assert downloaded == sorted(files)
    token = base64.b64encode(f"hpcml:{secret}".encode()).decode()
    assert {auth for _, auth in seen} == {f"Basic {token}"}  # every request the index saw carried them
    assert secret not in run.stdout + run.stderr and token not in run.stdout + run.stderr
    # -vvv shows the environment on the module's command line: only the file's path, and the file is gone.
    configs = set(re.findall(r"PIP_CONFIG_FILE=(\S+?\.pip\.conf)", run.stdout))
    assert len(configs) == 1 and not Path(configs.pop()).exists()


# PyTorch's CPU wheel is not on the index: the role fetches it from python_env_torch_cpu_url, checked against the lock,
# and pip takes it from the wheelhouse beside the dependencies the index gives.
def torch_download(tmp_path, cpu_served: bool):
    torch_name, dep_name = "torch", "hpcml_locktest_torchdep"
    torch_file, dep_file = "torch-1.0+cpu-py3-none-any.whl", f"{dep_name}-1.0-py3-none-any.whl"
    files = {torch_file: tiny_wheel(torch_name, "1.0+cpu"), dep_file: tiny_wheel(dep_name)}
    seen = []

    class Index(http_stub.Handler):
        def do_GET(self):
            path = urllib.parse.unquote(self.path)
            seen.append((path, self.headers.get("Authorization")))
            parts = path.strip("/").split("/")
            if parts[:1] == ["simple"] and len(parts) == 2:
                links = "".join(f'<a href="/files/{f}#sha256={hashlib.sha256(files[f]).hexdigest()}">{f}</a>'
                                for f in (dep_file,) if canonical(f).startswith(canonical(parts[1]) + "-"))
                self.send_body(f"<html><body>{links}</body></html>".encode(), "text/html")
            elif parts[:1] == ["files"] and parts[-1] == dep_file:
                self.send_body(files[dep_file])
            elif parts[:1] == ["cpu"] and parts[-1] == torch_file and cpu_served:
                self.send_body(files[torch_file])
            else:
                self.send_error(404)

    locks, torch_locks = tmp_path / "locks", tmp_path / "torch-locks"
    locks.mkdir()
    torch_locks.mkdir()
    (locks / "cp311-x86_64.txt").write_text("")  # nothing of TensorFlow's: this is about torch's download
    (locks / "horovod-0.28.1.txt").write_text("")
    (torch_locks / "cp311-x86_64-cpu.txt").write_text("".join(
        f"{n}=={v} --hash=sha256:{hashlib.sha256(files[f]).hexdigest()}  # {f}\n"
        for n, v, f in [(torch_name, "1.0+cpu", torch_file), (dep_name, "1.0", dep_file)]))
    wheelhouse = tmp_path / "wheelhouse"
    secret = "t0rch-secret-9c2e"
    with http_stub.serving(Index) as port:
        run = play(tmp_path, role_tasks("python_env", "10-wheelhouse"), extravars={
            "_python_env_build_facts": BUILD_FACTS, "python_env_wheelhouse": str(wheelhouse),
            "python_env_lock_dir": str(locks), "python_env_torch_lock_dir": str(torch_locks),
            "python_env_horovod_gpu": "false", "python_env_torch_cpu_url": f"http://127.0.0.1:{port}/cpu/",
            "python_env_pip_index_url": f"http://hpcml:{secret}@127.0.0.1:{port}/simple/"})
    return run, wheelhouse, files, seen, secret


def test_the_cpu_wheel_is_fetched_on_its_own_and_pip_takes_it_from_the_wheelhouse(tmp_path):
    run, wheelhouse, files, seen, secret = torch_download(tmp_path, cpu_served=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(p.name for p in wheelhouse.glob("*/*.whl")) == sorted(files)
    assert ("/cpu/torch-1.0+cpu-py3-none-any.whl", None) in seen  # the public CPU URL is asked without credentials
    assert [auth for path, auth in seen if path.startswith(("/simple", "/files"))] and all(
        auth for path, auth in seen if path.startswith(("/simple", "/files")))
    assert secret not in run.stdout + run.stderr


def test_a_cpu_wheel_nowhere_to_be_had_fails_the_download_saying_where_it_looked(tmp_path):
    run, wheelhouse, _, _, _ = torch_download(tmp_path, cpu_served=False)
    text = " ".join(run.stdout.split())
    assert run.returncode != 0 and run.failed == 1
    assert "Could not fetch torch-1.0+cpu-py3-none-any.whl from http://127.0.0.1:" in text
    assert "Download PyTorch's wheels" in text and not list(wheelhouse.glob("*/torch-*.whl"))


# Preflight's refusals for PyTorch: no lock for the node's build, a lock that pins the wrong build or leaves a line
# unhashed, and a GPU node whose driver is older than the CUDA build needs.
def preflight(tmp_path, **extravars):
    tasks = [*SHARED_VALUES, {"name": "role defaults", "ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
             {"name": "role vars", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
             {"name": "preflight", "ansible.builtin.include_tasks": str(ROLE / "tasks" / "00-preflight.yml")}]
    return play(tmp_path, tasks, extravars={"role_path": str(ROLE), "_python_env_build_facts": BUILD_FACTS, **extravars})


def torch_lock_dir(tmp_path, cpu: str | None = None, cuda: str | None = None) -> str:
    folder = tmp_path / "torch-locks"
    folder.mkdir()
    for flavour, text in (("cpu", cpu), ("cuda", cuda)):
        if text is not None:
            (folder / f"cp311-x86_64-{flavour}.txt").write_text(text)
    return str(folder)


def test_preflight_passes_a_gpu_node_with_its_lock_and_a_new_enough_driver(tmp_path):
    run = preflight(tmp_path, python_env_cuda_wheels=True, python_env_nvidia_driver_version="580.95.05")
    assert run.returncode == 0 and run.failed == 0, run.stdout[-3000:]


def test_preflight_refuses_a_gpu_node_without_the_cuda_builds_lock(tmp_path):
    folder = torch_lock_dir(tmp_path, cpu=(TORCH_LOCKS / "cp311-x86_64-cpu.txt").read_text())
    run = preflight(tmp_path, python_env_cuda_wheels=True, python_env_nvidia_driver_version="580.95.05",
                    python_env_torch_lock_dir=folder)
    assert run.refused(f"node001 takes PyTorch {TORCH}'s CUDA build (a GPU node: python_env_cuda_wheels), but there is "
                       f"no hash lock {folder}/cp311-x86_64-cuda.txt")
    assert run.refused("tools/python_env_lock.py --only torch --python-version 3.11 --arch x86_64")


def test_preflight_refuses_a_cpu_node_without_the_cpu_builds_lock(tmp_path):
    folder = torch_lock_dir(tmp_path, cuda=(TORCH_LOCKS / "cp311-x86_64-cuda.txt").read_text())
    run = preflight(tmp_path, python_env_torch_lock_dir=folder)
    assert run.refused(f"node001 takes PyTorch {TORCH}'s CPU build (a CPU node), but there is no hash lock "
                       f"{folder}/cp311-x86_64-cpu.txt")


@pytest.mark.parametrize("change", ["cuda build", "nvidia wheel", "unhashed line"])
def test_preflight_refuses_a_cpu_lock_that_is_not_the_cpu_build_all_hashed(tmp_path, change):
    text = (TORCH_LOCKS / "cp311-x86_64-cpu.txt").read_text()
    if change == "cuda build":
        text = text.replace(f"torch=={TORCH}+cpu ", f"torch=={TORCH} ")
    elif change == "nvidia wheel":
        text += re.search(r"(?m)^nvidia-nccl-cu13==.*\n", (TORCH_LOCKS / "cp311-x86_64-cuda.txt").read_text()).group(0)
    else:
        text += "numpy==1.26.4\n"
    run = preflight(tmp_path, python_env_torch_lock_dir=torch_lock_dir(tmp_path, cpu=text))
    assert run.refused(f"cp311-x86_64-cpu.txt must pin torch=={TORCH}+cpu (cpu build), every line with --hash=sha256, "
                       "and for CPU nodes no nvidia-*, cuda-* or triton wheels")


@pytest.mark.parametrize(("given", "shown"), [
    ({"python_env_nvidia_driver_version": "570.172.08"}, "the node has driver 570.172.08"),
    # By default the driver the node layer's nvidia_driver role recorded installing.
    ({"node_facts_records": {"nvidia_driver": {"version": "535.247.01"}}}, "the node has driver 535.247.01"),
    # Else the driver nvidia-smi reported to node_facts.
    ({"node_facts_hardware": {"gpu_steps": "run", "driver_version": "550.54.15"}}, "the node has driver 550.54.15"),
    ({}, "no driver version is known for the node (run the node layer first, or set python_env_nvidia_driver_version)"),
], ids=["set", "node layer record", "loaded driver", "unknown"])
def test_preflight_refuses_a_gpu_node_whose_driver_is_older_than_the_cuda_build_needs(tmp_path, given, shown):
    run = preflight(tmp_path, python_env_cuda_wheels=True, **given)
    runtime = lock(TORCH_LOCKS / "cp311-x86_64-cuda.txt")["nvidia-cuda-runtime"][0]
    assert run.refused(f"node001 takes PyTorch {TORCH}'s CUDA build (CUDA runtime {runtime}), which needs NVIDIA driver "
                       f"580.65.06 or newer; {shown}.")


def test_preflight_leaves_torch_alone_when_it_is_not_wanted(tmp_path):
    run = preflight(tmp_path, python_env_cuda_wheels=True, python_env_torch_enabled=False,
                    python_env_nvidia_driver_version="470.256.02", python_env_torch_lock_dir=str(tmp_path / "none"))
    assert run.returncode == 0 and run.failed == 0, run.stdout[-3000:]
