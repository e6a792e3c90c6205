"""Apptainer: `apptainer exec` starts each rank in a SIF image, as the user.

Written against Apptainer 1.3.6: `apptainer exec [--nv] --bind SRC[,SRC...] IMAGE CMD [ARG...]`; a --bind SRC binds
SRC at the same path, a missing mount point made by its underlay (`enable underlay = yes` by default). It passes the
caller's environment on (not HOME, PATH or LD_LIBRARY_PATH: internal/pkg/util/env/create.go), so the launcher's
variables reach the rank.

GPUs: --nv binds the host's NVIDIA driver libraries and devices into the container at run time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from benchrunner.containers import Container, Runtime

# The image a container runs, which apptainer sets as the absolute path it was given (internal/pkg/runtime/launch/
# launcher_linux.go, setImageOrInstance) and never takes from the caller's environment.
CONTAINER_ENV = "APPTAINER_CONTAINER"


class Apptainer(Runtime):
    name = "apptainer"
    release = "Apptainer 1.3.6"
    sign = f"{CONTAINER_ENV} in its environment, the image apptainer runs"

    def command(self, container: Container, argv: list[str], gpus: bool) -> list[str]:
        return ["apptainer", "exec", *(["--nv"] if gpus else []), "--bind", ",".join(container.mounts),
                container.image, *argv]

    def inside(self, environ: Mapping[str, str], mountinfo: str) -> bool:
        return CONTAINER_ENV in environ

    def image_problem(self, container: Container, environ: Mapping[str, str]) -> str | None:
        # Go's filepath.Abs cleans the path as normpath does.
        running = environ[CONTAINER_ENV]
        if running != os.path.normpath(container.image):
            return (f"this rank records container image {container.image}, but apptainer runs {running} "
                    f"({CONTAINER_ENV}): pass --image as it was started")
        return None
