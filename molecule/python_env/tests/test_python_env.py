"""The training environment a node ends up with, checked by using it."""

import json

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
    wheelhouse = host.file("/var/cache/hpcml/wheelhouse/cp311-x86_64")
    assert wheelhouse.is_directory
    names = host.check_output("ls /var/cache/hpcml/wheelhouse/cp311-x86_64").split()
    assert any(n.startswith("horovod-0.28.1-cp311-cp311-linux_x86_64") and n.endswith(".whl") for n in names)
    assert any(n.startswith("tensorflow-2.15.1-") for n in names)


def test_profile_puts_the_environment_on_path(host):
    out = host.check_output("bash -lc 'command -v horovodrun'")
    assert out == f"{VENV}/bin/horovodrun"


def test_benchrunner_trains_one_rank_and_writes_a_valid_result(host):
    run = host.run(f"su - hpcbench -c '{VENV}/bin/benchrunner train --run-id molecule --output-dir /tmp/mol-run "
                   "--steps 3 --warmup-steps 1 --batch-size 8'")
    assert run.rc == 0, run.stderr
    result = host.file("/tmp/mol-run/rank-00000.json")
    assert result.exists
    check = host.run(f"{VENV}/bin/benchrunner schema-check /tmp/mol-run/rank-00000.json")
    assert check.rc == 0, check.stderr
    document = json.loads(result.content_string)
    assert document["size"] == 1
    assert len(document["step_times_s"]) == 3
    assert document["metrics"]["images_per_sec"] > 0
    assert document["provenance"]["tensorflow"]["version"] == "2.15.1"
