"""A rank records the launcher that started it, or fails at its entry (`benchrunner train`/`allreduce`) before it imports
its framework: shown here for TensorFlow and Horovod, where importing Horovod fails."""

from __future__ import annotations

import re
import sys

import pytest

from benchrunner import cli
from benchrunner.rank_env import LAUNCHER_VARIABLES


@pytest.fixture
def no_horovod(monkeypatch, tmp_path):
    """A rank's environment without any launcher's variables, where importing Horovod fails: a rank that reaches the
    import got past the launcher check."""
    for _, names in LAUNCHER_VARIABLES:
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", None)
    return monkeypatch


def run(launcher: str, program: str, tmp_path) -> None:
    args = cli.build_parser().parse_args([program, "--launcher", launcher, "--run-id", "r1", "--output-dir",
                                          str(tmp_path)])
    args.func(args)


@pytest.mark.parametrize("program", ["train", "allreduce"])
@pytest.mark.parametrize(("launcher", "variables", "said"), [
    ("mpirun", {}, "records launcher mpirun, whose ranks find openmpi's variables, but it found none of torchrun's, "
                   "Open MPI's or Slurm's variables (a process started by hand)"),
    ("srun", {"OMPI_COMM_WORLD_RANK": "0"}, "records launcher srun, whose ranks find slurm's variables, but it found "
                                            "openmpi's variables"),
    ("torchrun", {"RANK": "0"}, "launcher torchrun starts no tensorflow-horovod ranks")])
def test_a_rank_filed_under_another_launcher_fails_before_it_imports_horovod(no_horovod, tmp_path, program, launcher,
                                                                             variables, said):
    for name, value in variables.items():
        no_horovod.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(said)):
        run(launcher, program, tmp_path)


@pytest.mark.parametrize(("launcher", "variables"), [
    ("mpirun", {"OMPI_COMM_WORLD_RANK": "1"}), ("mpijob", {"OMPI_COMM_WORLD_RANK": "1"}),
    ("srun", {"SLURM_PROCID": "1"}),
    # mpirun inside a Slurm allocation: the allocation's variables are inherited, Open MPI's decide.
    ("mpirun", {"SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "1"}),
    # horovodrun starts ranks through mpirun or Horovod's Gloo launcher: nothing to check.
    ("horovodrun", {})])
def test_a_rank_started_by_the_launcher_it_records_goes_on_to_import_horovod(no_horovod, tmp_path, launcher, variables):
    for name, value in variables.items():
        no_horovod.setenv(name, value)
    with pytest.raises(ImportError):
        run(launcher, "train", tmp_path)
