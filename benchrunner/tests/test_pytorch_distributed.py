"""Where a torch rank is, from each launcher's variables, and what it needs to meet the others."""

from __future__ import annotations

import pytest

from benchrunner.frameworks._torch.distributed import (
    Placement,
    device_name,
    rank_environment,
    rendezvous_environment,
)
from benchrunner.launchers import launcher_problem

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}
SLURM = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "2"}


@pytest.mark.parametrize(("environ", "placement"), [
    (TORCHRUN, Placement(3, 8, 1, 2, "torchrun")),
    (OPENMPI, Placement(5, 6, 2, 3, "openmpi")),
    (SLURM, Placement(2, 4, 0, 2, "slurm")),
    ({**SLURM, "SLURM_NTASKS": "6", "SLURM_NTASKS_PER_NODE": "2(x3)"}, Placement(2, 6, 0, 2, "slurm")),
    ({}, Placement(0, 1, 0, 1, "single")),
    ({"PATH": "/usr/bin", "MASTER_ADDR": "node1"}, Placement(0, 1, 0, 1, "single")),
])
def test_each_launchers_variables_place_the_rank(environ, placement):
    assert rank_environment(environ) == placement


def test_mpirun_inside_a_slurm_allocation_is_placed_by_open_mpi():
    # mpirun's ranks inherit the allocation's SLURM_* (the batch step's own PROCID and NTASKS).
    assert rank_environment({**SLURM, **OPENMPI}).source == "openmpi"
    assert rank_environment({**OPENMPI, **TORCHRUN}).source == "torchrun"


def test_torchrun_under_srun_places_its_ranks_not_the_agents_task():
    # Each agent is one srun task per node (SLURM_PROCID the node's, SLURM_NTASKS the nodes'); its ranks inherit them.
    agent_task = {**SLURM, "SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "1"}
    assert rank_environment({**agent_task, **TORCHRUN}) == Placement(3, 8, 1, 2, "torchrun")


@pytest.mark.parametrize(("environ", "named"), [
    ({"RANK": "0", "WORLD_SIZE": "2"}, "LOCAL_RANK, LOCAL_WORLD_SIZE"),
    ({"WORLD_SIZE": "2"}, "RANK"),
    ({k: v for k, v in SLURM.items() if k != "SLURM_NTASKS_PER_NODE"}, "--ntasks-per-node"),
    ({**TORCHRUN, "RANK": "8"}, "RANK=8 must be below WORLD_SIZE=8"),
    ({**TORCHRUN, "RANK": "-1"}, "RANK='-1' is not a whole number"),
    ({**TORCHRUN, "WORLD_SIZE": "eight"}, "WORLD_SIZE='eight'"),
    ({**TORCHRUN, "WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE=0 must be at least 1"),
    ({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_RANK": "3"}, "OMPI_COMM_WORLD_LOCAL_RANK=3 must be below"),
    ({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "7", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
     "OMPI_COMM_WORLD_LOCAL_SIZE=7 exceeds OMPI_COMM_WORLD_SIZE=6"),
    ({**SLURM, "SLURM_NTASKS_PER_NODE": "2(x3),1"}, "SLURM_NTASKS_PER_NODE='2(x3),1'"),
    ({**SLURM, "SLURM_NTASKS_PER_NODE": ""}, "SLURM_NTASKS_PER_NODE=''"),
])
def test_partial_or_inconsistent_variables_fail_naming_the_variable(environ, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        rank_environment(environ)


@pytest.mark.parametrize(("environ", "cuda_devices", "device"), [
    ({"BENCHRUNNER_GPU": "1"}, 4, "cuda:1"),
    ({"BENCHRUNNER_GPU": "1"}, 1, "cuda:0"),  # each rank sees only its own GPU
    ({"BENCHRUNNER_GPU": "1"}, 0, "cpu"),  # asked, none there: trains anyway, recorded, failed by sanity
    ({"BENCHRUNNER_GPU": "0"}, 4, "cpu"),
    ({}, 4, "cpu"),
])
def test_a_rank_trains_on_a_gpu_of_its_own_only_when_the_job_asks_and_cuda_has_one(environ, cuda_devices, device):
    assert device_name(Placement(3, 8, 1, 2, "torchrun"), environ, cuda_devices) == device


def test_many_ranks_meet_at_the_address_the_launcher_exports():
    placement = Placement(1, 2, 1, 2, "openmpi")
    environ = {"MASTER_ADDR": "node1", "MASTER_PORT": "29500", "OTHER": "x"}
    assert rendezvous_environment(placement, environ) == {"MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
    with pytest.raises(ValueError, match="MASTER_ADDR not set: 2 ranks"):
        rendezvous_environment(placement, {"MASTER_PORT": "29500"})
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT not set"):
        rendezvous_environment(placement, {})


def test_a_rank_alone_serves_itself_on_the_loopback_on_a_port_the_kernel_picks():
    alone = Placement(0, 1, 0, 1, "single")
    assert rendezvous_environment(alone, {}) == {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}
    assert rendezvous_environment(alone, {"MASTER_ADDR": "h", "MASTER_PORT": "1"}) == {"MASTER_ADDR": "h",
                                                                                         "MASTER_PORT": "1"}


@pytest.mark.parametrize(("launcher", "environ"), [
    ("torchrun", TORCHRUN), ("mpirun", OPENMPI), ("mpijob", OPENMPI), ("srun", SLURM)])
def test_a_rank_started_by_the_launcher_it_records_passes(launcher, environ):
    assert launcher_problem(rank_environment(environ).source, launcher, "pytorch-ddp") is None


@pytest.mark.parametrize(("launcher", "environ", "said"), [
    ("mpirun", {}, "records launcher mpirun, whose ranks find openmpi's variables, but it found none of torchrun's, "
                   "Open MPI's or Slurm's variables (a process started by hand)"),
    ("srun", OPENMPI, "records launcher srun, whose ranks find slurm's variables, but it found openmpi's variables"),
    ("horovodrun", OPENMPI, "launcher horovodrun starts no pytorch-ddp ranks")])
def test_a_rank_filed_under_another_launcher_than_started_it_is_refused(launcher, environ, said):
    assert said in launcher_problem(rank_environment(environ).source, launcher, "pytorch-ddp")
