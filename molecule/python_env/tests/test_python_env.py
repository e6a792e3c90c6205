"""The training environment a node ends up with, checked by using it."""

import json
import shlex

VENV = "/opt/hpcml/venv"


def test_tensorflow_and_horovod_at_the_pinned_versions(host):
    freeze = host.check_output(f"{VENV}/bin/pip freeze")
    assert "tensorflow==2.15.1" in freeze.splitlines()
    assert "horovod==0.28.1" in freeze.splitlines()


def test_horovod_was_built_with_tensorflow_mpi_and_gloo(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/hpcml_python_env.fact").content_string)
    build = fact["horovod_build"]
    assert build["version"] == "0.28.1"
    assert "TensorFlow" in build["frameworks"]
    assert {"MPI", "Gloo"} <= set(build["controllers"])


def test_installed_offline_from_the_node_wheelhouse(host):
    wheelhouse = host.file("/var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu")
    assert wheelhouse.is_directory
    names = host.check_output("ls /var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu").split()
    assert any(n.startswith("horovod-0.28.1-cp311-cp311-linux_x86_64") and n.endswith(".whl") for n in names)
    assert any(n.startswith("tensorflow-2.15.1-") for n in names)
    # PyTorch's CPU build only: none of the CUDA build's wheels reach a CPU node.
    assert "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in names
    assert not [n for n in names if n.startswith(("torch-2.13.0-", "triton-", "nvidia_", "cuda_"))]


def test_installed_from_hashed_pins_only_without_cuda_wheels_on_a_cpu_node(host):
    requirements = host.file("/var/cache/hpcml/wheelhouse/requirements-debian12-cp311-x86_64-cpu.txt").content_string
    assert requirements.splitlines() == [
        "--requirement /var/cache/hpcml/wheelhouse/pins-debian12-cp311-x86_64-cpu.txt",
        "--requirement /var/cache/hpcml/wheelhouse/horovod-debian12-cp311-x86_64-cpu.txt"]
    horovod = host.file("/var/cache/hpcml/wheelhouse/horovod-debian12-cp311-x86_64-cpu.txt").content_string
    assert horovod.startswith("horovod==0.28.1 --hash=sha256:")
    fact = json.loads(host.file("/etc/ansible/facts.d/hpcml_python_env.fact").content_string)
    assert horovod.split("sha256:")[1].split()[0] == fact["horovod_sha256"]
    lock = host.file("/var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu/lock.txt").content_string
    pins = [line for line in lock.splitlines() if not line.startswith("#")]
    assert len(pins) == 50 and all(" --hash=sha256:" in line for line in pins)
    # TensorFlow's 50 pins less its build-only setuptools, and PyTorch's 10: one pin per package, each hashed.
    node = host.file("/var/cache/hpcml/wheelhouse/pins-debian12-cp311-x86_64-cpu.txt").content_string
    node_pins = [line for line in node.splitlines() if not line.startswith("#")]
    names = [line.split("==")[0].lower().replace("_", "-") for line in node_pins]
    assert len(node_pins) == 57 and len(set(names)) == 57
    assert all(" --hash=sha256:" in line for line in node_pins)
    assert [line.split()[0] for line in node_pins if line.startswith(("torch==", "setuptools=="))] == [
        "setuptools==81.0.0", "torch==2.13.0+cpu"]
    assert host.run(f"{VENV}/bin/pip check").rc == 0
    freeze = host.check_output(f"{VENV}/bin/pip freeze").lower()
    assert "nvidia-" not in freeze and "triton" not in freeze and "cuda-" not in freeze
    assert not host.file("/var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu/lock-cuda.txt").exists
    assert not host.file("/var/cache/hpcml/wheelhouse/debian12-cp311-x86_64-cpu/lock-torch-cuda.txt").exists


def test_torch_is_the_pinned_cpu_build_with_gloo(host):
    probe = ("import json, torch, torch.distributed as d; "
             "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, 'gloo': d.is_gloo_available()}))")
    assert json.loads(host.check_output(f"{VENV}/bin/python -c {shlex.quote(probe)}")) == {
        "version": "2.13.0+cpu", "cuda": None, "gloo": True}
    fact = json.loads(host.file("/etc/ansible/facts.d/hpcml_python_env.fact").content_string)
    assert fact["torch"] == {"version": "2.13.0+cpu", "cuda": None, "gloo": True}


def test_torch_allreduces_over_gloo_as_an_unprivileged_user(host):
    script = ("import torch, torch.distributed as d; "
              "d.init_process_group('gloo', init_method='file:///tmp/mol-gloo', rank=0, world_size=1); "
              "t = torch.arange(4.0); d.all_reduce(t); print(t.tolist()); d.destroy_process_group()")
    run = host.run(f"rm -f /tmp/mol-gloo; su - hpcbench -c {shlex.quote(f'{VENV}/bin/python -c {shlex.quote(script)}')}")
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "[0.0, 1.0, 2.0, 3.0]"


def test_tensorboard_still_finds_pkg_resources_beside_torchs_setuptools(host):
    """torch needs setuptools 77 or later; TensorBoard 2.15 imports pkg_resources, which setuptools 82 dropped."""
    run = host.run(f"{VENV}/bin/python -W ignore -c 'import pkg_resources, tensorboard.default, setuptools; "
                   "print(setuptools.__version__)'")
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "81.0.0"


def test_profile_puts_the_environment_on_path(host):
    out = host.check_output("bash -lc 'command -v horovodrun'")
    assert out == f"{VENV}/bin/horovodrun"


# One rank under the launcher it records (the CLI's default, mpirun): a rank started alone is refused below.
ONE_RANK = "mpirun -np 1"


def test_a_horovod_rank_started_by_hand_is_refused_before_it_trains(host):
    run = host.run(f"su - hpcbench -c '{VENV}/bin/benchrunner train --run-id mol-alone --output-dir /tmp/mol-alone'")
    assert run.rc != 0
    assert "records launcher mpirun" in run.stderr and "(a process started by hand)" in run.stderr, run.stderr
    assert not host.file("/tmp/mol-alone/rank-00000.json").exists


def test_benchrunner_trains_one_rank_and_writes_a_valid_result(host):
    run = host.run(f"su - hpcbench -c '{ONE_RANK} {VENV}/bin/benchrunner train --run-id molecule --output-dir /tmp/mol-run "
                   "--measured-steps 3 --warmup-steps 1 --batch-size 8'")
    assert run.rc == 0, run.stderr
    result = host.file("/tmp/mol-run/rank-00000.json")
    assert result.exists
    check = host.run(f"{VENV}/bin/benchrunner schema-check /tmp/mol-run/rank-00000.json")
    assert check.rc == 0, check.stderr
    document = json.loads(result.content_string)
    assert document["size"] == 1
    assert len(document["step_times_s"]) == 3
    assert document["metrics"]["samples_per_sec"] > 0 and document["metrics"]["unit"] == "images"
    assert document["provenance"]["tensorflow"]["version"] == "2.15.1"
    assert document["provenance"]["launcher"] == "mpirun"


def test_benchrunner_trains_on_real_data_from_tfrecords(host):
    """The ChestX-ray14-style dataset, written as TFRecords, read by the tf.data pipeline, multi-label."""
    made = host.run(f"su - hpcbench -c '{VENV}/bin/benchrunner dataset /tmp/mol-cxr --images 16 --image-size 32 "
                    "--tfrecord-shards 2'")
    assert made.rc == 0, made.stderr
    assert len(host.file("/tmp/mol-cxr/tfrecord").listdir()) == 2
    run = host.run(f"su - hpcbench -c '{ONE_RANK} {VENV}/bin/benchrunner train --run-id mol-real --output-dir /tmp/mol-real "
                   "--data tfrecord --data-dir /tmp/mol-cxr --measured-steps 2 --warmup-steps 1 --batch-size 4 "
                   "--precision mixed_float16 --fp16-allreduce'")
    assert run.rc == 0, run.stderr
    document = json.loads(host.file("/tmp/mol-real/rank-00000.json").content_string)
    assert document["workload"]["data"] == "tfrecord" and document["workload"]["num_classes"] == 14
    assert all(loss is not None for loss in document["losses"])


def test_benchrunner_allreduce_sweep_writes_a_valid_result(host):
    run = host.run(f"su - hpcbench -c '{ONE_RANK} {VENV}/bin/benchrunner allreduce --run-id mol-ar --output-dir /tmp/mol-ar "
                   "--max-bytes 4096'")
    assert run.rc == 0, run.stderr
    check = host.run(f"{VENV}/bin/benchrunner schema-check /tmp/mol-ar/allreduce.json")
    assert check.rc == 0, check.stderr
    points = json.loads(host.file("/tmp/mol-ar/allreduce.json").content_string)["points"]
    assert [p["bytes"] for p in points] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert all(p["algbw_bytes_per_s"] > 0 for p in points)
