#!/usr/bin/env python3
"""Writes python_env's hash locks: every wheel the environment installs from the index, pinned with its sha256.

Run it with the project's venv (it reads the role's YAML): `.venv/bin/python tools/python_env_lock.py`.
It makes a throwaway venv under /tmp with the newest pip, reads no pip configuration but the options below, and asks
pip to resolve, for the nodes' platform (the same --platform/--python-version flags the role downloads with):
  - the environment: tensorflow==V, the role's extra, Horovod and build requirements, under the constraints file;
  - the same with tensorflow[and-cuda]==V: the difference is the CUDA libraries TensorFlow was built against.
`pip install --dry-run --report` names the file pip would take and its sha256 from the index, without downloading
the wheels. Horovod's source distribution (compiled by the role) is pinned with the sha256 the simple index gives.
It fails when the resolution and the constraints file disagree: regenerate the constraints first.

PyTorch (locks/torch-V/, after the TensorFlow lock, whose pins it keeps wherever both need a package):
  - <tag>-cpu.txt: torch==V+cpu from PyTorch's CPU index (--torch-cpu-index-url, or --torch-cpu-find-links for a
    folder holding the wheel) and its dependencies from the index. These wheels (about 200 MB) are downloaded and
    every sha256 is taken from the file itself, and must equal the index's where it gives one.
  - <tag>-cuda.txt: torch==V from the index (PyPI's torch is the CUDA build) with the nvidia-* wheels it requires.
    Resolved from the wheels' metadata only (pip's fast-deps: HTTP range requests), not the 2.5-3 GB of wheels: the
    sha256 is the index's; --download-cuda downloads them and checks each file against it.
--only tensorflow|torch writes one family; the torch locks need the TensorFlow lock of the same tag.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[1] / "roles" / "python_env"
# What the role's download uses for a node of this architecture (tasks/10-wheelhouse.yml).
PLATFORMS = ("manylinux2014_{arch}", "manylinux_2_28_{arch}")
# Only these of the caller's pip settings carry over: the CA bundle and timeouts, never an index or find-links.
KEPT_PIP_ENV = ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")
# PyTorch's CUDA wheels name older glibc baselines (nvidia_cudnn_cu13 manylinux_2_27, nvidia_nccl_cu13 manylinux_2_18),
# and pip widens only the legacy manylinux2014 tag, so every baseline up to torch's own (2_28) is listed.
TORCH_PLATFORMS = ("manylinux2014_{arch}", *(f"manylinux_2_{minor}_{{arch}}" for minor in range(28, 16, -1)))
# torch needs setuptools>=77.0.3; TensorBoard 2.15 imports pkg_resources (tensorboard/default.py), which setuptools 82
# removed. The environment's setuptools is the torch lock's; Horovod's build venv keeps the TensorFlow lock's 69.5.1.
TORCH_EXTRA_CONSTRAINTS = ("setuptools<82",)
# What a CPU node must never get: the CUDA build's runtime libraries and compiler.
CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line (comments and blank lines skipped)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)(\s.*)?", line)
        if not match:
            raise SystemExit(f"not an exact pin: {line!r}")
        found[canonical(match.group(1))] = match.group(2)
    if not found:
        raise SystemExit("no pins found")
    return found


def platform_args(platforms: tuple[str, ...], arch: str) -> list[str]:
    return [arg for platform in platforms for arg in ("--platform", platform.format(arch=arch))]


def resolve(pip: list[str], env: dict[str, str], requirements: list[str], constraints: Path, args,
            platforms: tuple[str, ...] = PLATFORMS, sources: tuple[str, ...] = (), need_sha256: bool = True,
            ) -> dict[str, dict]:
    """canonical name -> {name, version, file, url, sha256} of what pip would install on the nodes' platform.
    sources: further pip options saying where to look (--extra-index-url, --find-links, --use-feature=fast-deps)."""
    with tempfile.TemporaryDirectory(prefix="python-env-lock-") as work:
        req = Path(work) / "requirements.txt"
        req.write_text("\n".join(requirements) + "\n")
        report = Path(work) / "report.json"
        command = [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
                   "--only-binary=:all:", "--implementation", "cp", "--python-version", args.python_version,
                   "--target", str(Path(work) / "target"), "-r", str(req), "-c", str(constraints),
                   *platform_args(platforms, args.arch), *sources]
        if args.index_url:
            command += ["--index-url", args.index_url]
        subprocess.run(command, env=env, check=True)
        installs = json.loads(report.read_text())["install"]
    if not installs:
        raise SystemExit(f"pip resolved nothing for {requirements}")
    found = {}
    for item in installs:
        url = item["download_info"]["url"]
        sha256 = item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
        if not sha256 and need_sha256:
            raise SystemExit(f"the index gave no sha256 for {url}")
        name = item["metadata"]["name"]
        found[canonical(name)] = {"name": name, "version": item["metadata"]["version"],
                                  "file": urllib.parse.unquote(url.rsplit("/", 1)[1]), "url": url, "sha256": sha256}
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_and_hash(pip: list[str], env: dict[str, str], entries: dict[str, dict], args,
                      platforms: tuple[str, ...], sources: tuple[str, ...]) -> None:
    """Downloads exactly the files resolved (--no-deps, each by its pin) and sets every sha256 from the file itself;
    one that differs from the index's stops the lock."""
    with tempfile.TemporaryDirectory(prefix="python-env-lock-wheels-") as work:
        req = Path(work) / "requirements.txt"
        req.write_text("".join(f"{e['name']}=={e['version']}\n" for e in entries.values()))
        command = [*pip, "download", "--quiet", "--no-deps", "--dest", work, "--only-binary=:all:",
                   "--implementation", "cp", "--python-version", args.python_version, "-r", str(req),
                   *platform_args(platforms, args.arch), *sources]
        if args.index_url:
            command += ["--index-url", args.index_url]
        subprocess.run(command, env=env, check=True)
        for entry in entries.values():
            path = Path(work) / entry["file"]
            if not path.is_file():
                raise SystemExit(f"pip download did not fetch {entry['file']} (got {sorted(os.listdir(work))})")
            actual = sha256_of(path)
            if entry["sha256"] and entry["sha256"] != actual:
                raise SystemExit(f"{entry['file']}: the index says sha256 {entry['sha256']}, the file has {actual}")
            entry["sha256"] = actual


def sdist_sha256(name: str, version: str, index_url: str) -> tuple[str, str]:
    """The source distribution's file name and sha256, from the simple index's JSON form (PEP 691), as pip reads it."""
    request = urllib.request.Request(f"{index_url.rstrip('/')}/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = [f for f in json.load(response)["files"] if f["filename"] == f"{name}-{version}.tar.gz"]
    if len(files) != 1 or "sha256" not in files[0]["hashes"]:
        raise SystemExit(f"{name} {version}: expected one source distribution with a sha256 on {index_url}, got {files}")
    return files[0]["filename"], files[0]["hashes"]["sha256"]


def lock_text(header: list[str], entries: list[dict]) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    for entry in sorted(entries, key=lambda e: canonical(e["name"])):
        lines.append(f"{entry['name']}=={entry['version']} --hash=sha256:{entry['sha256']}  # {entry['file']}")
    return "\n".join(lines) + "\n"


def made_header(pip_version: str, args, platforms: tuple[str, ...], source: str) -> list[str]:
    return [f"Written by tools/python_env_lock.py on {datetime.date.today()} with pip {pip_version}:",
            f"pip install --dry-run --report --only-binary=:all: --implementation cp --python-version "
            f"{args.python_version} " + " ".join(platform_args(platforms, args.arch)),
            f"against {args.index_url or 'PyPI'}{source}.",
            "Regenerate with the same script; do not edit by hand."]


def tensorflow_locks(pip: list[str], env: dict[str, str], pip_version: str, defaults: dict, role_vars: dict, args) -> None:
    tensorflow = defaults["python_env_tensorflow_version"]
    horovod = defaults["python_env_horovod_version"]
    constraints_file = ROLE / "files" / "constraints" / f"tensorflow-{tensorflow}.txt"
    constraints = pins(constraints_file.read_text())
    extra = (list(defaults["python_env_extra_requirements"]) + list(role_vars["_python_env_horovod_requirements"])
             + list(defaults["python_env_build_requirements"]))
    build = pins("\n".join(defaults["python_env_build_requirements"]))

    # Horovod is compiled by the role, not resolved here; the build tools are pinned beside the constraints.
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pinned:
        pinned.write("\n".join(f"{n}=={v}" for n, v in {**constraints, **build}.items() if n != "horovod") + "\n")
        pinned.flush()
        base = resolve(pip, env, [f"tensorflow=={tensorflow}", *extra], Path(pinned.name), args)
        with_cuda = resolve(pip, env, [f"tensorflow[and-cuda]=={tensorflow}", *extra], Path(pinned.name), args)

    expected = (set(constraints) - {"horovod"}) | set(build)
    if set(base) != expected:
        raise SystemExit(f"{constraints_file.name} and the resolution disagree: only pinned "
                         f"{sorted(expected - set(base))}, only resolved {sorted(set(base) - expected)}")
    changed = {n for n in base if with_cuda[n]["sha256"] != base[n]["sha256"]}
    if changed:
        raise SystemExit(f"the CUDA extra changes the base environment: {sorted(changed)}")
    cuda = [with_cuda[n] for n in sorted(set(with_cuda) - set(base))]
    if not cuda or any(not n.startswith("nvidia-") for n in set(with_cuda) - set(base)):
        raise SystemExit(f"expected only nvidia-* wheels from tensorflow[and-cuda], got {[e['name'] for e in cuda]}")
    sdist_file, sdist_hash = sdist_sha256("horovod", horovod, args.index_url or "https://pypi.org/simple")

    out = ROLE / "files" / "locks" / f"tensorflow-{tensorflow}"
    out.mkdir(parents=True, exist_ok=True)
    tag = f"cp{args.python_version.replace('.', '')}-{args.arch}"
    made = made_header(pip_version, args, PLATFORMS, "; the sha256 is the index's for the file named after each pin")
    (out / f"{tag}.txt").write_text(lock_text(
        [f"TensorFlow {tensorflow} environment for {tag}: {constraints_file.name} (Horovod aside, compiled by the "
         "role) and the build tools.", *made], list(base.values())))
    (out / f"{tag}-cuda.txt").write_text(lock_text(
        [f"CUDA libraries tensorflow[and-cuda]=={tensorflow} pins, for GPU nodes ({tag}).", *made], cuda))
    (out / f"horovod-{horovod}.txt").write_text(lock_text(
        [f"Horovod {horovod}'s source distribution, compiled by the role on its build host.",
         f"Written by tools/python_env_lock.py on {datetime.date.today()}: sha256 from the simple index's JSON "
         f"(PEP 691) at {args.index_url or 'PyPI'}.", "Regenerate with the same script; do not edit by hand."],
        [{"name": "horovod", "version": horovod, "file": sdist_file, "sha256": sdist_hash}]))
    print(f"wrote {out}: {len(base)} + {len(cuda)} CUDA wheels for {tag}, Horovod {horovod} source")


def read_lock(path: Path) -> dict[str, dict]:
    """canonical name -> {name, version, sha256, file} of a lock this script wrote."""
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) --hash=sha256:([0-9a-f]{64})  # (\S+)", line)
        if not match:
            raise SystemExit(f"{path}: not a line this script writes: {line!r}")
        found[canonical(match.group(1))] = dict(zip(("name", "version", "sha256", "file"), match.groups()))
    return found


def torch_locks(pip: list[str], env: dict[str, str], pip_version: str, defaults: dict, args) -> None:
    torch = defaults["python_env_torch_version"]
    tag = f"cp{args.python_version.replace('.', '')}-{args.arch}"
    tf_lock_path = ROLE / "files" / "locks" / f"tensorflow-{defaults['python_env_tensorflow_version']}" / f"{tag}.txt"
    if not tf_lock_path.is_file():
        raise SystemExit(f"no {tf_lock_path}: write the TensorFlow locks first (--only tensorflow)")
    tf_lock = read_lock(tf_lock_path)
    build = set(pins("\n".join(defaults["python_env_build_requirements"])))
    # One environment holds both: the TensorFlow lock's pins bind torch's resolution, except Horovod's build tools,
    # which only its build venv needs at those versions.
    kept = [f"{e['name']}=={e['version']}" for n, e in tf_lock.items() if n not in build]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write("\n".join([*kept, *TORCH_EXTRA_CONSTRAINTS]) + "\n")
        constraints.flush()
        cpu_sources = ((f"--extra-index-url={args.torch_cpu_index_url}",) if args.torch_cpu_index_url else ()) + (
            (f"--find-links={args.torch_cpu_find_links}",) if args.torch_cpu_find_links else ())
        cpu = resolve(pip, env, [f"torch=={torch}+cpu"], Path(constraints.name), args, TORCH_PLATFORMS, cpu_sources,
                      need_sha256=False)
        download_and_hash(pip, env, cpu, args, TORCH_PLATFORMS, cpu_sources)
        # Never the CPU index here: PyPI's torch of this version is the CUDA build.
        cuda = resolve(pip, env, [f"torch=={torch}"], Path(constraints.name), args, TORCH_PLATFORMS,
                       ("--use-feature=fast-deps",))
        if args.download_cuda:
            download_and_hash(pip, env, cuda, args, TORCH_PLATFORMS, ())

    if cpu["torch"]["version"] != f"{torch}+cpu" or [n for n in cpu if CUDA_ONLY.match(n)]:
        raise SystemExit(f"the CPU resolution is not torch {torch}+cpu alone: {sorted(cpu)}")
    if cuda["torch"]["version"] != torch or not [n for n in cuda if n.startswith("nvidia-")]:
        raise SystemExit(f"the CUDA resolution is not torch {torch} with nvidia-* wheels: {sorted(cuda)}")
    for name, lock in (("CPU", cpu), ("CUDA", cuda)):
        differ = {n for n in set(lock) & set(tf_lock) if lock[n]["version"] != tf_lock[n]["version"]}
        if not differ <= build:
            raise SystemExit(f"the {name} lock moves TensorFlow's pins {sorted(differ - build)}: the environment "
                             "could not hold both")

    out = ROLE / "files" / "locks" / f"torch-{torch}"
    out.mkdir(parents=True, exist_ok=True)
    keeps = f"pins of {tf_lock_path.parent.name}/{tag}.txt kept (its build tools aside), " + ", ".join(
        TORCH_EXTRA_CONSTRAINTS)
    cpu_from = " and ".join(filter(None, [args.torch_cpu_index_url, args.torch_cpu_find_links]))
    (out / f"{tag}-cpu.txt").write_text(lock_text(
        [f"PyTorch {torch}, CPU build, for CPU nodes ({tag}): torch=={torch}+cpu from {cpu_from}, its dependencies "
         f"from the index; {keeps}.",
         *made_header(pip_version, args, TORCH_PLATFORMS, f" and {cpu_from}; the sha256 is that of the file pip "
                      "downloaded (equal to the index's where it gave one)")], list(cpu.values())))
    (out / f"{tag}-cuda.txt").write_text(lock_text(
        [f"PyTorch {torch}, CUDA build (PyPI's torch=={torch} with the nvidia-* wheels it requires), for GPU nodes "
         f"({tag}); {keeps}.",
         *made_header(pip_version, args, TORCH_PLATFORMS, " with --use-feature=fast-deps (wheel metadata only); the sha256 "
                      + ("of the file pip downloaded, equal to the index's" if args.download_cuda else
                         "is the index's for the file named after each pin (not downloaded: 2.5-3 GB)"))],
        list(cuda.values())))
    print(f"wrote {out}: {len(cpu)} wheels (CPU build), {len(cuda)} wheels (CUDA build) for {tag}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default="3.11", help="the nodes' Python (default 3.11, Debian 12)")
    parser.add_argument("--arch", default="x86_64")
    parser.add_argument("--index-url", default="", help="simple index to resolve against (default PyPI)")
    parser.add_argument("--only", choices=["tensorflow", "torch"], help="write one family of locks (default both)")
    parser.add_argument("--torch-cpu-index-url", default="https://download.pytorch.org/whl/cpu",
                        help="index holding torch==V+cpu (default PyTorch's; empty: none)")
    parser.add_argument("--torch-cpu-find-links", default="", help="a folder or page holding the torch==V+cpu wheel")
    parser.add_argument("--download-cuda", action="store_true",
                        help="download the CUDA build's wheels (2.5-3 GB) and check each against the index's sha256")
    args = parser.parse_args()

    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in KEPT_PIP_ENV}
    env["PIP_CONFIG_FILE"] = os.devnull
    with tempfile.TemporaryDirectory(prefix="python-env-lock-venv-", dir="/tmp") as venv:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = [f"{venv}/bin/python", "-m", "pip"]
        subprocess.run([*pip, "install", "--quiet", "--upgrade", "pip"], env=env, check=True)
        pip_version = subprocess.run([*pip, "--version"], env=env, check=True, capture_output=True,
                                     text=True).stdout.split()[1]
        if args.only in (None, "tensorflow"):
            tensorflow_locks(pip, env, pip_version, defaults, role_vars, args)
        if args.only in (None, "torch"):
            torch_locks(pip, env, pip_version, defaults, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
