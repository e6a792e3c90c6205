from ansible_collections.hpcml.cluster.plugins.filter.horovod_build import FilterModule
from ansible_collections.hpcml.cluster.plugins.module_utils.horovod import parse_check_build


def test_cpu_build_recorded_on_the_lab(fixture_text):
    parsed = parse_check_build(fixture_text("horovodrun-check-build.cpu.txt"))
    assert parsed["version"] == "0.28.1"
    assert "TensorFlow" in parsed["frameworks"]
    assert "MXNet" not in parsed["frameworks"]
    assert parsed["controllers"] == ["MPI", "Gloo"]
    assert parsed["tensor_operations"] == ["MPI", "Gloo"]


def test_gpu_build_with_nccl():
    text = ("Horovod v0.28.1:\n\nAvailable Frameworks:\n    [X] TensorFlow\n    [ ] PyTorch\n\n"
            "Available Controllers:\n    [X] MPI\n    [ ] Gloo\n\n"
            "Available Tensor Operations:\n    [X] NCCL\n    [ ] DDL\n    [X] MPI\n")
    assert parse_check_build(text) == {"version": "0.28.1", "frameworks": ["TensorFlow"], "controllers": ["MPI"],
                                       "tensor_operations": ["NCCL", "MPI"]}


def test_filter_is_registered():
    assert FilterModule().filters()["horovod_build"] is parse_check_build
