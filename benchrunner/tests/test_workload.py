import argparse

import pytest

from benchrunner import workload as workload_module
from benchrunner.workload import Workload


def parse(argv: list[str]) -> Workload:
    parser = argparse.ArgumentParser()
    workload_module.add_arguments(parser)
    return Workload.from_args(parser.parse_args(argv))


@pytest.mark.parametrize("workload", [
    Workload(),
    Workload(model="resnet50", batch_size=64, image_size=224, precision="mixed_float16", xla=True),
    Workload(model="densenet121_chexnet", data="tfrecord", data_dir="/data/cxr", warmup_steps=1,
             measured_steps=100, learning_rate=0.001),
    Workload(fusion_threshold_mb=0, cycle_time_ms=2.5, fp16_allreduce=True, hierarchical_allreduce=True),
])
def test_options_round_trip_through_the_command_line(workload):
    assert parse(workload.to_argv()) == workload


def test_defaults_need_no_options():
    assert Workload().to_argv() == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"model": "resnet9000"}, "model 'resnet9000' is not one of"),
    ({"data": "images"}, "data 'images' needs a data directory"),
    ({"data": "csv", "data_dir": "/x"}, "data 'csv' is not one of synthetic, images, tfrecord"),
    ({"precision": "fp8"}, "precision 'fp8' is not one of"),
    ({"batch_size": 0}, "batch size and measured steps must be >= 1"),
    ({"warmup_steps": 0}, "warmup steps must be >= 1"),
    ({"image_size": 4}, "image size 4 is below the 8 px small_cnn accepts"),
    ({"model": "resnet50", "image_size": 31}, "image size 31 is below the 32 px resnet50 accepts"),
    ({"model": "inception_v3", "image_size": 64}, "image size 64 is below the 75 px inception_v3 accepts"),
    ({"learning_rate": 0.0}, r"learning rate must be a finite number > 0 \(got 0.0\)"),
    ({"learning_rate": float("nan")}, r"learning rate must be a finite number > 0 \(got nan\)"),
    ({"learning_rate": float("inf")}, r"learning rate must be a finite number > 0 \(got inf\)"),
    ({"cycle_time_ms": 0.0}, r"cycle time must be a finite number > 0 ms"),
    ({"cycle_time_ms": float("nan")}, r"cycle time must be a finite number > 0 ms \(got nan\)"),
    ({"fusion_threshold_mb": -1}, r"fusion threshold must be >= 0 MiB \(got -1\)"),
])
def test_invalid_settings_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        Workload(**changes).validate()


def test_horovod_knobs_become_horovods_environment():
    assert Workload().horovod_environment() == {}
    assert Workload(fusion_threshold_mb=64, cycle_time_ms=3.5, hierarchical_allreduce=True).horovod_environment() == {
        "HOROVOD_FUSION_THRESHOLD": str(64 * 1024 * 1024), "HOROVOD_CYCLE_TIME": "3.5",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}


def test_real_data_and_chexnet_are_multi_label_with_fourteen_findings():
    assert Workload().classes == 10 and not Workload().multi_label
    assert Workload(model="densenet121_chexnet").classes == 14
    assert Workload(data="images", data_dir="/d").record()["num_classes"] == 14


def test_unknown_settings_in_a_mapping_are_named():
    with pytest.raises(ValueError, match="unknown workload settings: steps"):
        Workload.from_mapping({"model": "small_cnn", "steps": 10})
