"""The torch framework packages (pytorch-ddp, pytorch-fsdp) as their callers see them: light to import, their settings
checked against the workload."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchrunner
from benchrunner import frameworks
from benchrunner.frameworks import pytorch_fsdp
from benchrunner.frameworks.pytorch_ddp import Settings
from benchrunner.workload import Workload

SRC = str(Path(benchrunner.__file__).resolve().parents[1])


@pytest.mark.parametrize("package", ["pytorch_ddp", "pytorch_fsdp"])
def test_importing_the_package_loads_no_torch_tensorflow_or_horovod(package):
    code = (f"import json, sys; import benchrunner.frameworks.{package} as p; p.Settings().problems(__import__("
            "'benchrunner.workload').workload.Workload()); print(json.dumps(sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('torch', 'tensorflow', 'horovod', 'torchvision'))))")
    loaded = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": SRC}, capture_output=True, text=True,
                            check=True)
    assert json.loads(loaded.stdout) == []


@pytest.mark.parametrize("name", frameworks.names())
def test_the_entry_points_stay_callable_once_their_modules_are_imported(name):
    # A submodule named train or allreduce would replace the function of that name on the package.
    package = frameworks.get(name)
    submodules = [info.name for info in pkgutil.iter_modules(package.__path__)]
    assert "training" in submodules and not {"train", "allreduce"} & set(submodules)
    importlib.import_module(f"{package.__name__}.training")
    assert package.NAME == name
    assert callable(package.train) and callable(package.allreduce)


def test_defaults_and_real_data_tuning_pass():
    assert Settings() == Settings(compile=False, channels_last=False, dataloader_workers=2, pin_memory=True,
                                  activation_checkpointing="none")
    assert pytorch_fsdp.Settings() == pytorch_fsdp.Settings(reshard_after_forward=True, hsdp=False)
    text = Workload(framework="pytorch-fsdp", model="llama-tiny", precision="mixed_bfloat16")
    for mode in ("none", "full", "selective"):
        assert pytorch_fsdp.Settings(activation_checkpointing=mode, compile=True, reshard_after_forward=False,
                                     hsdp=True).problems(text) == []
    assert Settings(compile=True, channels_last=True).problems(Workload()) == []
    real = Workload(data="images", data_dir="/data/chestxray14")
    assert Settings(dataloader_workers=0, pin_memory=False).problems(real) == []
    assert Settings(dataloader_workers=256).problems(real) == []


@pytest.mark.parametrize(("settings", "workload", "problem"), [
    (Settings(dataloader_workers=-1), Workload(data="images", data_dir="/d"),
     "dataloader workers must be an integer from 0 to 256 per rank, each a process of its own on every rank (got -1)"),
    (Settings(dataloader_workers=1000000), Workload(data="images", data_dir="/d"),
     "dataloader workers must be an integer from 0 to 256 per rank, each a process of its own on every rank "
     "(got 1000000)"),
    (Settings(), Workload(data="tfrecord", data_dir="/d"), "reads no TFRecord files"),
    (Settings(dataloader_workers=4), Workload(), "dataloader_workers tune the DataLoader of real data"),
    (Settings(pin_memory=False), Workload(), "pin_memory tune the DataLoader of real data"),
    (Settings(activation_checkpointing="some"), Workload(model="llama-tiny"),
     "activation checkpointing 'some' is not one of none, full, selective"),
    (Settings(activation_checkpointing="full"), Workload(model="resnet50"),
     "activation checkpointing recomputes a transformer's blocks; resnet50 is an image model: leave it out"),
    (Settings(channels_last=True), Workload(model="llama-tiny"),
     "channels-last lays out images' channels; llama-tiny is a text model: leave it out"),
    (pytorch_fsdp.Settings(), Workload(framework="pytorch-fsdp", precision="mixed_float16"),
     "pytorch-fsdp trains in fp32 or mixed_bfloat16 (bfloat16 parameters, float32 reduction); mixed_float16 would "
     "need a sharded loss scaler: use mixed_bfloat16"),
])
def test_problems_name_each_setting_this_framework_cannot_honour(settings, workload, problem):
    assert any(problem in found for found in settings.problems(workload)), settings.problems(workload)


@pytest.mark.parametrize(("values", "problem"), [
    ({"dataloader_workers": True}, r"dataloader_workers must be an integer \(got True, a boolean\)"),
    ({"compile": "yes"}, r"compile must be true or false \(got 'yes', a string\)"),
    ({"xla": True}, "workload setting xla belongs to tensorflow-horovod, not to this job's framework pytorch-ddp"),
    ({"hsdp": True}, "workload setting hsdp belongs to pytorch-fsdp, not to this job's framework pytorch-ddp"),
])
def test_a_pytorch_workload_refuses_wrong_types_and_tensorflows_settings_by_name(values, problem):
    with pytest.raises(ValueError, match=problem):
        Workload.from_mapping({"framework": "pytorch-ddp", **values})
