"""The container runtimes a job's ranks may run in on the bare-metal stacks: each is one module of this package defining
one subclass of Runtime, found here and nowhere else.

A container is a runtime, an image file on the nodes and the host folders the ranks see inside it at their own paths.
The launchers ask the runtime how to start a rank's program inside it (its command, or the options srun adds), never
its name; the rank, told its container on its command line, asks the runtime whether it really runs inside it (the
sign each runtime leaves), and records the container in its provenance.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from benchrunner import plugins

# What the job document, the rank's options and its record say for ranks in the nodes' virtualenv, on bare metal.
NONE = "none"
# The rank program inside the benchmark image: its virtualenv's (benchrunner/Containerfile, VIRTUAL_ENV), named in
# full since a runtime may start it with the host's PATH (ch-run passes the caller's environment on).
IMAGE_BENCHRUNNER = "/opt/hpcml/venv/bin/benchrunner"
# Memory-backed shared memory, which NCCL's and Gloo's shared-memory transports use between a node's ranks: the
# host's, bound explicitly, whatever /dev a site's runtime configuration gives a container.
SHM = "/dev/shm"
# The host's machine ID, which tells the summary the ranks' machines apart (provenance.machine_id): an image's own is
# the same on every node, or absent.
MACHINE_ID = "/etc/machine-id"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# Where the kernel lists this process's mounts (proc(5), /proc/pid/mountinfo: the fifth field is the mount point).
MOUNTINFO = "/proc/self/mountinfo"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Container:
    """A job's container: its runtime, the image file on the nodes (an absolute path), the image's digest
    ("sha256:<64 hex>"; empty until the launch computes it) and the host paths bound into it at the same paths."""

    runtime: str
    image: str
    digest: str
    mounts: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        """What a rank result, a summary and provenance record of it."""
        return {"runtime": self.runtime, "image": self.image, "digest": self.digest, "mounts": list(self.mounts)}


class Runtime:
    """One container runtime. Each runtime module defines one subclass; the registry holds one instance of each.

    name      what jobs, the launch command and campaigns call it
    release   the upstream release its command line and its sign inside are written against
    sign      what a process inside it finds, in words (for the rank's refusal)
    """

    name: ClassVar[str]
    release: ClassVar[str]
    sign: ClassVar[str]

    def command(self, container: Container, argv: list[str], gpus: bool) -> list[str]:
        """The node's command that runs argv inside the container (gpus: the job gives every rank a GPU)."""
        raise ValueError(f"container runtime {self.name} starts containers only through srun's options ({self.release})")

    def srun_task(self, container: Container, argv: list[str], gpus: bool) -> list[str]:
        """srun's options and the task's argv for a step whose tasks run argv inside the container: by default, srun
        starts the runtime's command as each task."""
        return self.command(container, argv, gpus)

    def environment(self, gpus: bool) -> dict[str, str]:
        """What every rank's environment must hold for the runtime to give it what the job asks (none by default)."""
        return {}

    def inside(self, environ: Mapping[str, str], mountinfo: str) -> bool:
        """Whether a process with this environment and /proc/self/mountinfo runs inside one of its containers."""
        raise NotImplementedError

    def image_problem(self, container: Container, environ: Mapping[str, str]) -> str | None:
        """Where the runtime says which image this process runs in and it is not the container's (None where it does
        not say)."""
        return None


def mount_points(mountinfo: str) -> set[str]:
    """The mount points of a /proc/pid/mountinfo text (proc(5): the fifth field, octal escapes as the kernel writes
    them)."""
    return {fields[4] for fields in (line.split() for line in mountinfo.splitlines()) if len(fields) > 4}


@cache
def registry() -> dict[str, Runtime]:
    """Every runtime of this package by its name."""
    return plugins.discover(__name__, __path__, "container runtime", plugin=plugins.instance_of(Runtime, "container runtime"),
                            name=lambda runtime: runtime.name)


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def choices() -> tuple[str, ...]:
    """What a job, a rank or a campaign may ask for: no container, or one of the runtimes."""
    return (NONE, *names())


def get(name: str) -> Runtime:
    return plugins.pick(registry(), name, "container runtime")


def mounts(results_dir: str, data_dir: str | None) -> tuple[str, ...]:
    """What a job's ranks see inside their container at the host's paths: the nodes' results folder (a run's own
    folder is made at each run, so an image cannot hold its mount point; the results folder it can), the dataset folder
    where the job reads one, shared memory and the machine ID."""
    return (results_dir, *((data_dir,) if data_dir else ()), SHM, MACHINE_ID)


def mount_point_kind(mount: str) -> str:
    """What an image must hold at a mount point for a runtime that cannot make one (Charliecloud's read-only SquashFS)
    to bind the host's path there: a file for the machine ID, a directory for every other mount."""
    return "file" if mount == MACHINE_ID else "directory"


def record(container: Container | None) -> dict[str, Any]:
    """The container a rank, summary or provenance records: {"runtime": "none"} in the nodes' virtualenv."""
    return container.record() if container else {"runtime": NONE}


def recorded(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The container a rank's provenance or a summary records; one made before benchrunner recorded containers ran in
    the nodes' virtualenv."""
    return provenance.get("container", {"runtime": NONE})


def problems(container: Container, launcher: str, launcher_containers: tuple[str, ...]) -> list[str]:
    """Every problem of a job's container, each naming what is wrong and what may be given (that its paths are
    absolute, the job's check of every path it holds)."""
    found = []
    if container.runtime not in registry():
        found.append(f"container runtime {container.runtime!r} is not one of {', '.join(names())}")
    elif container.runtime not in launcher_containers:
        can = (f"it starts them in {', '.join(launcher_containers)}" if launcher_containers
               else "it starts no ranks in containers")
        found.append(f"launcher {launcher} cannot start ranks in {container.runtime} containers ({can})")
    found += [p for p in (separator_problem("container image", container.image), digest_problem(container.digest),
                          *(separator_problem("container mount", mount) for mount in container.mounts)) if p]
    return found


def separator_problem(what: str, path: str) -> str | None:
    """Why a path cannot go into a runtime's mount list: ',' and ':' separate them (ch-run --bind SRC:DST, Pyxis's
    --container-mounts, Apptainer's --bind)."""
    if "," in path or ":" in path:
        return f"{what} {path!r} must not hold ',' or ':' (they separate the container runtimes' mount lists)"
    return None


def digest_problem(digest: str) -> str | None:
    """Empty (computed from the image at launch) or sha256:<64 lowercase hex digits>."""
    if digest and not DIGEST.fullmatch(digest):
        return f"container image digest {digest!r} is not sha256:<64 lowercase hex digits>"
    return None


def image_digest(path: str) -> str:
    """The image file's sha256, as "sha256:<hex>"."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise ValueError(f"container image {path}: cannot read: {exc.strerror}") from exc
    return f"sha256:{digest.hexdigest()}"


def verified(container: Container) -> Container:
    """The container with its image's digest, computed from the file here; a digest given must be the file's."""
    found = image_digest(container.image)
    if container.digest and container.digest != found:
        raise ValueError(f"container image {container.image}: its digest is {found}, not the {container.digest} "
                         "the job gives: the image changed, or the job names another one")
    return Container(container.runtime, container.image, found, container.mounts)


def container_problem(container: Container | None, environ: Mapping[str, str], mountinfo: str) -> str | None:
    """Where a rank that records `container` (None: the nodes' virtualenv) runs elsewhere: a rank started outside
    the container it records, or inside one it does not, would file a run under what it did not use."""
    found = [name for name, runtime in sorted(registry().items()) if runtime.inside(environ, mountinfo)]
    if container is None:
        if not found:
            return None
        return (f"this rank records no container, but runs inside {found[0]} ({get(found[0]).sign}): pass "
                "--container as it was started")
    runtime = get(container.runtime)
    if container.runtime not in found:
        return (f"this rank records container {container.runtime}, but does not run inside one (no "
                f"{runtime.sign}): start it through {container.runtime}, or pass --container as it was started")
    return runtime.image_problem(container, environ)
