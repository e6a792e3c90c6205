"""Charliecloud: ch-run starts each rank in an unprivileged user namespace from a SquashFS image file, which it mounts
itself through libsquashfuse (Debian's charliecloud-runtime 0.31 is built with it; the node needs /dev/fuse).

Written against ch-run 0.31 (bin/ch-run.c, bin/ch_core.c): `ch-run [OPTION...] IMAGE -- CMD [ARG...]`; --bind=SRC
binds SRC at the same path inside. The image's root is read-only, so every mount point must already be in the image
(ch-run can make a missing one only in a writable image): benchrunner.containers.mounts names them. ch-run shares the
host's /dev, /proc, /sys and /etc/machine-id of its own (BINDS_DEFAULT) and passes the caller's environment on, so
the launcher's variables reach the rank.

GPUs: ch-run cannot give a container the host's driver at run time. The image is prepared once with
`ch-fromhost --nvidia IMAGE_DIR` (it copies the host's NVIDIA libraries in), before it is packed as SquashFS; the
devices come with the host's /dev.
"""

from __future__ import annotations

from collections.abc import Mapping

from benchrunner.containers import Container, Runtime

# What ch-run sets in every container's environment, whatever --set-env and --unset-env say (ch-run.c,
# fix_environment).
RUNNING_ENV = "CH_RUNNING"
RUNNING_VALUE = "Weird Al Yankovic"


class Charliecloud(Runtime):
    name = "charliecloud"
    release = "Charliecloud 0.31"
    sign = f"{RUNNING_ENV}={RUNNING_VALUE!r} in its environment, which ch-run sets"

    def command(self, container: Container, argv: list[str], gpus: bool) -> list[str]:
        return ["ch-run", *(f"--bind={mount}" for mount in container.mounts), container.image, "--", *argv]

    def inside(self, environ: Mapping[str, str], mountinfo: str) -> bool:
        return environ.get(RUNNING_ENV) == RUNNING_VALUE
