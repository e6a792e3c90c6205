"""The training workload in PyTorch FSDP2: the shared torch loop (frameworks._torch.loop) around `fully_shard`,
applied to each block (a transformer's layers, an image model's top-level children) and then to the root.

Before the model is built, each rank checks that FSDP2 averages gradients over the ranks on its process group: pytorch
issue 162338 reports Gloo's reduce-scatter ignoring FSDP2's ReduceOp.AVG, which leaves every gradient multiplied by
the world size. AdamW's update hides that; the gradient norm and SGD do not. A torch that does it is refused."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from benchrunner.frameworks._torch import loop
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.frameworks.pytorch_fsdp import NAME, Settings
from benchrunner.train import RunContext
from benchrunner.workload import Workload


@functools.cache
def mesh_for(settings: Settings, placement: Placement, device: torch.device) -> DeviceMesh:
    """All ranks in one shard group; with HSDP a 2-D mesh (nodes, local ranks): shards within a node, replicas
    across nodes (every node runs the same number of ranks, as every launcher here places them). Made once per
    process (the check and the model share it): each mesh of several dimensions makes process groups of its own."""
    world, local = placement.world_size, placement.local_world_size
    if not settings.hsdp:
        return init_device_mesh(device.type, (world,), mesh_dim_names=("shard",))
    if world % local:
        raise ValueError(f"hsdp shards within a node and replicates across nodes: {world} ranks do not split into "
                         f"nodes of {local} ranks each")
    return init_device_mesh(device.type, (world // local, local), mesh_dim_names=("replicate", "shard"))


def check_gradient_average(mesh: DeviceMesh, device: torch.device) -> float:
    """FSDP2's gradient on this mesh for a gradient of 1 on every rank, which averaged is 1: a tiny unit of one
    parameter per rank (no model yet, one all-gather and one reduce-scatter). Returns the factor it came out
    multiplied by; refuses (RuntimeError) a torch and backend that do not average, naming them."""
    probe = nn.Linear(1, mesh.size(), bias=False, device=device)
    with torch.no_grad():
        probe.weight.fill_(1.0)
    fully_shard(probe, mesh=mesh)
    # d(sum(W x))/dW = x = 1 on every rank.
    probe(torch.ones(1, 1, device=device)).sum().backward()
    local = probe.weight.grad.to_local()  # type: ignore[union-attr]
    factor = float(local.mean().item())  # one row of the weight on each rank
    if not math.isclose(factor, 1.0, rel_tol=1e-6):
        backend = dist.get_backend()
        raise RuntimeError(
            f"FSDP2 on torch {torch.__version__} with the {backend} backend does not average gradients over the "
            f"{mesh.size()} ranks: a gradient of 1 on every rank came out as {factor:g} (pytorch issue 162338: "
            f"{backend}'s reduce-scatter ignoring ReduceOp.AVG). Gradients, norms and SGD steps would be "
            f"{factor:g} times too large; use a torch where FSDP2 averages on {backend}")
    return factor


def wrap(module: nn.Module, workload: Workload, settings: Settings, placement: Placement,
         device: torch.device) -> loop.Wrapped:
    """fully_shard each block (compiled already where asked), then the root; bfloat16 parameters and float32
    reductions under mixed_bfloat16."""
    mesh = mesh_for(settings, placement, device)
    reshard = settings.reshard_after_forward
    bf16 = workload.precision == "mixed_bfloat16"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 \
        else MixedPrecisionPolicy()
    for _, block in loop.units(module, workload.kind):
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    root: Any = fully_shard(module, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)

    @contextlib.contextmanager
    def gradient_sync(enabled: bool) -> Iterator[None]:
        # Micro-batches before the last keep their unsharded gradients; the last one's backward reduce-scatters.
        root.set_requires_gradient_sync(enabled)
        yield

    record = {"wrapper": "fsdp2", "mesh": dict(zip(mesh.mesh_dim_names or (), mesh.shape, strict=True)),
              "reshard_after_forward": reshard, "param_dtype": "bfloat16" if bf16 else "float32",
              "reduce_dtype": "float32"}
    return loop.Wrapped(root, gradient_sync, None, record)


def run(workload: Workload, settings: Settings, context: RunContext) -> dict[str, Any]:
    """Train for warmup + measured steps; write and return this rank's result."""
    def check(placement: Placement, device: torch.device) -> None:
        check_gradient_average(mesh_for(settings, placement, device), device)

    return loop.run(NAME, workload, settings, context, wrap, joined=check, compile_blocks=True)
