"""Enroot under Slurm through Pyxis, NVIDIA's SPANK plugin: srun's own options name the image and the mounts, and
Pyxis starts each task inside the container (Enroot unpacks the SquashFS image, the tasks join its namespaces). There
is no command to wrap a rank in: Enroot's containers start only under srun here.

Written against Pyxis v0.20.0 (args.c): --container-image=PATH takes a SquashFS file on the nodes,
--container-mounts=SRC:DST[,SRC:DST...] binds each (Pyxis adds x-create=auto,rbind, so a missing mount point is
made), and Enroot 3.5.0 (src/runtime.sh, conf/hooks/98-nvidia.sh, conf/mounts/10-system.fstab). Enroot starts the
container with a clean environment; Pyxis then gives each task the job's with the image's on top.

GPUs: Enroot's nvidia hook hands the container the GPUs libnvidia-container finds when NVIDIA_VISIBLE_DEVICES is set
(in the job's environment or the image's), with the driver's capabilities NVIDIA_DRIVER_CAPABILITIES names (only
`utility` where unset, which has no CUDA).
"""

from __future__ import annotations

from collections.abc import Mapping

from benchrunner.containers import Container, Runtime, mount_points

# Enroot opens the root's lock file while it sets the container up and then binds it read-only over itself
# (src/runtime.sh, lock_file="/.lock"): a mount at /.lock is Enroot's. It sets no variable of its own in the
# container's environment (enroot-switchroot loads it from scratch).
LOCK_MOUNT = "/.lock"
GPU_ENVIRONMENT = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


class Enroot(Runtime):
    name = "enroot"
    release = "Pyxis v0.20.0 with Enroot 3.5.0"
    sign = f"a mount at {LOCK_MOUNT} in /proc/self/mountinfo, Enroot's lock file"

    def srun_task(self, container: Container, argv: list[str], gpus: bool) -> list[str]:
        return [f"--container-image={container.image}",
                f"--container-mounts={','.join(f'{mount}:{mount}' for mount in container.mounts)}", *argv]

    def environment(self, gpus: bool) -> dict[str, str]:
        return dict(GPU_ENVIRONMENT) if gpus else {}

    def inside(self, environ: Mapping[str, str], mountinfo: str) -> bool:
        return LOCK_MOUNT in mount_points(mountinfo)
