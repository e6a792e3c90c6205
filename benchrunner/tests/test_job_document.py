"""The job document: checked in full, resolved once, kept as the record of what was asked."""

from __future__ import annotations

import io
import json
import os
import re

import pytest

from benchrunner import cli, dataset, job_document, launchers, results, watchdog


def request(**changes):
    return {"kind": "job", "schema_version": 1, "run_id": "r1", "program": "train", "stack": "baremetal",
            "launcher": "mpirun", "network": "tcp", "ranks": 0, "gpus_per_node": 0, "hosts": ["n1", "n2", "n3"],
            "workload": {}, "nodes": {"results_dir": "/var/lib/hpcml/results", "benchrunner": "/opt/venv/bin/benchrunner"},
            **changes}


def test_ranks_hosts_and_paths_are_derived_once():
    resolved = job_document.resolve(request(ranks=2))
    assert resolved["ranks"] == 2 and resolved["hosts"] == ["n1", "n2"]
    every = job_document.resolve(request(gpus_per_node=4))
    assert every["ranks"] == 12 and every["hosts"] == ["n1", "n2", "n3"]
    job = job_document.plan(request(ranks=5, gpus_per_node=4)).job
    assert job.hosts == ("n1", "n2") and job.output_dir == "/var/lib/hpcml/results/r1/raw"
    assert job.benchrunner == "/opt/venv/bin/benchrunner"
    pods = job_document.plan(request(launcher="mpijob", stack="k8s", ranks=2)).job
    assert pods.output_dir == "/tmp/benchrunner/r1/raw" and pods.benchrunner == "benchrunner"


def test_resolving_a_resolved_job_changes_nothing():
    for asked in (request(), request(workload={"data": "tfrecord"}, ranks=2),
                  request(launcher="mpijob", stack="k8s", network="rdma", kubernetes={"rdma_resource": "rdma/x"})):
        resolved = job_document.resolve(asked)
        assert job_document.resolve(json.loads(results.dumps(resolved))) == resolved


def test_real_data_without_a_folder_is_the_dataset_the_play_makes():
    resolved = job_document.resolve(request(ranks=2, workload={"data": "images"}))
    assert resolved["workload"]["data_dir"] == job_document.DEFAULT_DATASET["dir"]
    assert resolved["dataset"] == job_document.DEFAULT_DATASET
    own = job_document.resolve(request(ranks=2, workload={"data": "images", "data_dir": "/data/cxr"}))
    assert "dataset" not in own and own["workload"]["data_dir"] == "/data/cxr"
    assert "dataset" not in job_document.resolve(request(dataset=job_document.DEFAULT_DATASET))


@pytest.mark.parametrize(("changes", "said"), [
    ({"workload": {"image_s": 64}}, "unknown workload settings: image_s (known: batch_size"),
    ({"workload": {"batch_size": "32"}}, "workload: batch_size must be an integer (got '32', a string)"),
    ({"workload": {"xla": 1}}, "workload: xla must be true or false (got 1, an integer)"),
    ({"workload": {"batch_size": True}}, "workload: batch_size must be an integer (got True, a boolean)"),
    ({"workload": {"learning_rate": "0.1"}}, "workload: learning_rate must be a number (got '0.1', a string)"),
    ({"workload": {"data_dir": 5}}, "workload: data_dir must be a string or null (got 5, an integer)"),
    ({"env": {"X": True}}, "at env/X: True is not of type 'string'"),
    ({"env": {"A;touch /tmp/x": "1"}}, "environment variable name 'A;touch /tmp/x' is not a shell name"),
    ({"image": "x"}, "Additional properties are not allowed ('image' was unexpected)"),
    ({"ranks": 4}, "4 ranks at 1 per node need 4 hosts, 3 given"),
    ({"ranks": "2"}, "at ranks: '2' is not of type 'integer'"),
    ({"hosts": [], "ranks": 0}, "ranks is 0 (every host) but no hosts are given"),
    ({"hosts": ["gpu1\ngpu2 slots=64"]}, "host 'gpu1\\ngpu2 slots=64' is not a hostname"),
    ({"run_id": "latest"}, "run id 'latest' is reserved"),
    ({"launcher": "srun"}, "launcher srun does not run on stack baremetal"),
    # A launcher checks its own settings: srun's partition, here, goes into its batch script.
    ({"stack": "slurm", "launcher": "srun", "slurm": {"partition": "a\n#SBATCH --uid=0"}},
     "Slurm partition 'a\\n#SBATCH --uid=0' is not a partition name"),
    ({"program": "allreduce", "allreduce": {"min_bytes": 6}}, "min a multiple of 4"),
    ({"timeout_s": 0}, "at timeout_s: 0 is less than or equal to the minimum of 0"),
    ({"stall_timeout_s": 0}, "at stall_timeout_s: 0 is less than or equal to the minimum of 0"),
    ({"stall_timeout_s": "300"}, "at stall_timeout_s: '300' is not of type 'number'"),
    ({"stall_timeout_s": 5}, "stall_timeout_s must be a number of seconds from 10 (5 of the ranks' beats) to below "
                             "timeout_s (3600), got 5"),
    ({"stall_timeout_s": 3600}, "stall_timeout_s must be a number of seconds from 10 (5 of the ranks' beats) to below "
                                "timeout_s (3600), got 3600"),
    ({"stall_timeout_s": float("inf")}, "got inf"),
    ({"startup_timeout_s": "600"}, "at startup_timeout_s: '600' is not of type 'number'"),
    ({"startup_timeout_s": 3600}, "startup_timeout_s must be a number of seconds from 10 (5 of the ranks' beats) to "
                                  "below timeout_s (3600), got 3600"),
    ({"timeout_s": 15}, "to below timeout_s (15), got 7.5"),
    ({"launcher": "mpijob", "stack": "k8s", "network": "rdma"}, "an RDMA MPIJob needs kubernetes.rdma_resource"),
    ({"workload": {"data": "tfrecord"}, "dataset": {**job_document.DEFAULT_DATASET, "tfrecord_shards": 2}},
     "3 ranks cannot share the dataset's 2 TFRecord shards"),
    ({"workload": {"data": "images"}, "ranks": 3, "dataset": {**job_document.DEFAULT_DATASET, "images": 2}},
     "3 ranks cannot share the dataset's 2 images"),
])
def test_bad_jobs_are_refused_naming_what_is_wrong(changes, said):
    with pytest.raises(ValueError) as refused:
        job_document.resolve(request(**changes))
    assert said in str(refused.value)


def test_job_resolve_and_launch_read_a_document(tmp_path, capsys, monkeypatch):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(request(ranks=2, env={"B": "true"})))
    out = tmp_path / "resolved" / "job.json"
    assert cli.main(["job", "resolve", str(path), "--output", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(out.read_text())
    assert cli.main(["job", "launch", str(out), "--dry-run"]) == 0
    assert "-x B=true " in capsys.readouterr().out
    path.write_text("[1]")
    assert cli.main(["job", "resolve", str(path)]) == 2
    assert "a job document is a JSON object, got list" in capsys.readouterr().err
    path.write_text('{"ranks": NaN}')
    assert cli.main(["job", "launch", str(path)]) == 2
    assert "not JSON: NaN is not JSON" in capsys.readouterr().err


def test_a_node_launches_only_a_resolved_job_as_it_is(tmp_path, capsys, monkeypatch):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(request(ranks=2)))
    assert cli.main(["job", "launch", str(path), "--dry-run"]) == 2
    assert "not a resolved job (no 'resolved: true'): resolve the request first" in capsys.readouterr().err
    resolved = job_document.resolve(request(ranks=2))
    assert resolved["resolved"] is True and job_document.resolve(resolved) == resolved
    # What the control host resolved is what starts: the document itself, only checked.
    assert job_document.launch_plan(resolved).document is resolved
    # A resolved document edited into something the launcher cannot start is still refused.
    with pytest.raises(ValueError, match="2 ranks at 1 per node need 2 hosts, 1 given"):
        job_document.launch_plan({**resolved, "hosts": ["n1"]}, "edited")


def test_a_launchers_settings_in_a_job_of_another_launcher_are_refused_naming_the_key_and_its_readers():
    with pytest.raises(ValueError) as refused:
        job_document.resolve(request(ranks=2, slurm={"partition": "gpu"}))
    assert str(refused.value) == ("job document: slurm holds the settings of srun, torchrun, not of launcher mpirun "
                                  "(which takes no settings): leave slurm out, or choose one of srun, torchrun")
    # Empty, it is still another launcher's key, named beside the job's other problems.
    with pytest.raises(ValueError) as refused:
        job_document.resolve(request(stack="slurm", launcher="srun", ranks=2, hosts=["n1"], kubernetes={},
                                     slurm={}))
    assert str(refused.value) == ("job document: kubernetes holds the settings of mpijob, not of launcher srun (which "
                                  "reads slurm): leave kubernetes out, or choose one of mpijob; 2 ranks at 1 per node "
                                  "need 2 hosts, 1 given")


def test_a_resolved_job_holds_the_settings_of_its_own_launcher_alone():
    keys = launchers.settings_keys()
    assert keys == {"kubernetes": ("mpijob",), "slurm": ("srun", "torchrun")}
    for name in launchers.names():
        launcher = launchers.get(name)
        resolved = job_document.resolve(request(launcher=name, stack=launcher.stacks[0], ranks=2,
                                                framework=launcher.frameworks[0]))
        assert set(keys) & set(resolved) == {launcher.settings_key} - {None}, name


def srun_job(**changes):
    return job_document.resolve(request(stack="slurm", launcher="srun", ranks=2, hosts=["n1", "n2"], **changes))


def without(document, key):
    return {k: v for k, v in document.items() if k != key}


def edited(document, **changes):
    return {**document, **changes}


# A resolved job edited so that what it states twice disagrees, and what launch says of it.
NO_LONGER_HOLDS = [
    # The case: the batch script asked for two nodes, and the third host was dropped without a word.
    pytest.param(lambda: edited(srun_job(), hosts=["n1", "n2", "n3"]),
                 "the resolved job no longer holds together: 3 hosts for 2 ranks at 1 per node, which run on 2: n3 "
                 "would run nothing (a resolved job names only the hosts its ranks run on) (resolve the request again, "
                 "or change the keys together)", id="a-third-host-for-two-ranks"),
    pytest.param(lambda: edited(srun_job(), gpus_per_node=2),
                 "2 hosts for 2 ranks at 2 per node, which run on 1: n2 would run nothing", id="gpus-per-node"),
    pytest.param(lambda: edited(srun_job(), ranks=0), "ranks is 0, but resolving the job again makes it 2", id="ranks-0"),
    pytest.param(lambda: edited(srun_job(), stack="k8s"), "launcher srun does not run on stack k8s (it runs on slurm)",
                 id="launcher-and-stack"),
    pytest.param(lambda: edited(srun_job(framework="pytorch-ddp"), launcher="torchrun", stack="baremetal",
                                framework="tensorflow-horovod"),
                 "launcher torchrun does not start tensorflow-horovod ranks (it starts pytorch-ddp, pytorch-fsdp)",
                 id="launcher-and-framework"),
    pytest.param(lambda: edited(srun_job(), workload={"framework": "pytorch-ddp"}),
                 "workload: framework is the job's own key", id="framework-in-workload"),
    pytest.param(lambda: edited(srun_job(framework="pytorch-ddp", workload={"data": "images", "data_dir": "/d"}),
                                workload={"data": "images", "data_dir": "/d", "dataloader_workers": 1_000_000}),
                 "dataloader workers must be an integer from 0 to 256 per rank, each a process of its own on every "
                 "rank (got 1000000)", id="dataloader-workers"),
    pytest.param(lambda: edited(srun_job(workload={"data": "images"}),
                                workload={"data": "images", "data_dir": "/data/other"}),
                 'dataset is {"dir": "/var/lib/hpcml/datasets/chestxray14-mini", "image_size": 64, "images": 256, '
                 '"tfrecord_shards": 4}, but resolving the job again makes it absent', id="dataset-and-data-dir"),
    pytest.param(lambda: without(srun_job(), "nodes"), "nodes is left out, but resolving the job again makes it {",
                 id="nodes-left-out"),
    pytest.param(lambda: edited(srun_job(), slurm={"partition": None}),
                 'slurm.mpi is left out, but resolving the job again makes it "pmix"', id="slurm-mpi-left-out"),
    pytest.param(lambda: edited(job_document.resolve(mpijob_request()),
                                kubernetes={**job_document.resolve(mpijob_request())["kubernetes"], "version": None}),
                 'kubernetes.version is null, but resolving the job again makes it "1.33.5"', id="kubernetes-version-null"),
    pytest.param(lambda: edited(job_document.resolve(request(ranks=2)), slurm={"partition": None, "mpi": "pmix"}),
                 "slurm holds the settings of srun, torchrun, not of launcher mpirun (which takes no settings)",
                 id="another-launchers-settings"),
]


@pytest.mark.parametrize(("document", "said"), NO_LONGER_HOLDS)
def test_a_resolved_job_that_no_longer_holds_together_is_refused_before_anything_is_written(
        tmp_path, monkeypatch, capsys, document, said):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for launcher in ("sbatch", "mpirun", "torchrun"):
        (bin_dir / launcher).write_text(f"#!/bin/sh\ntouch {tmp_path / 'STARTED'}\n")
        (bin_dir / launcher).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    node = tmp_path / "node"
    job = document()
    if "nodes" in job:
        job["nodes"] = {**job["nodes"], "results_dir": str(node)}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    assert cli.main(["job", "launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"benchrunner: {path}: " in err and said in err and len(err.splitlines()) == 1, err
    assert not node.exists() and not (tmp_path / "STARTED").exists()


def test_a_job_document_longer_or_deeper_than_any_job_is_refused_before_it_is_parsed(tmp_path, monkeypatch, capsys):
    path = tmp_path / "job.json"
    path.write_text(json.dumps({**srun_job(), "env": {"PAD": "x" * job_document.MAX_CHARS}}))
    assert cli.main(["job", "launch", str(path)]) == 2
    assert (f"{path}: longer than the {job_document.MAX_CHARS} characters a job document may have (a resolved job is "
            "about 2 KB)") in capsys.readouterr().err
    # The limits are far above a real job's: the resolved jobs of the tests are a few KB and nest 3 levels.
    assert len(results.dumps(srun_job(workload={"data": "images"}))) < 4096
    nested = {"kind": "job", "env": json.loads("[" * 63 + "]" * 63)}
    assert job_document.loads(json.dumps(nested), "j")["env"] is not None
    with pytest.raises(ValueError, match=r"^stdin: arrays and objects nested more than 64 deep, far deeper than any "
                                         r"document benchrunner reads$"):
        job_document.loads("[" * 100_000 + "]" * 100_000, "stdin")
    monkeypatch.setattr("sys.stdin", io.StringIO("{" * 100_000))
    assert cli.main(["job", "resolve", "-"]) == 2
    assert "job document on standard input: arrays and objects nested more than 64 deep" in capsys.readouterr().err


def test_the_play_gets_the_mount_points_its_container_binds_with_the_kind_the_image_must_hold():
    # The role makes them in Charliecloud's read-only image before it packs it (ch-run 0.31 cannot).
    inventory = {"node-a": "n1", "node-b": "n2", "node-c": "n3"}
    container = {"runtime": "charliecloud", "image": "/shared/containers/i.sqfs"}
    placed = job_document.placement(request(ranks=2, container=container,
                                            workload={"data": "images", "data_dir": "/data/cxr"}), inventory)
    assert placed["mounts"] == [{"path": "/var/lib/hpcml/results", "kind": "directory"},
                                {"path": "/data/cxr", "kind": "directory"}, {"path": "/dev/shm", "kind": "directory"},
                                {"path": "/etc/machine-id", "kind": "file"}]
    assert [m["path"] for m in placed["mounts"]] == list(job_document.plan(placed["job"]).job.container.mounts)


def test_the_play_gets_the_job_its_hosts_by_inventory_name_and_the_files_the_launcher_leaves(tmp_path, capsys):
    inventory = {"node-a": "n1", "node-b": "n2", "node-c": "n3"}
    asked = {k: v for k, v in request(ranks=2).items() if k != "hosts"}
    placed = job_document.placement(asked, inventory)
    assert placed["hosts"] == ["node-a", "node-b"] and placed["job"]["hosts"] == ["n1", "n2"]
    assert placed["leaves"] == ["hostfile"] and placed["job"] == job_document.resolve(request(ranks=2))
    srun = job_document.placement({**asked, "stack": "slurm", "launcher": "srun"}, inventory)
    assert srun["leaves"] == ["job.sbatch"]
    # torchrun leaves its batch script under Slurm, nothing on bare metal (its agents start over SSH).
    under_slurm = {**asked, "launcher": "torchrun", "framework": "pytorch-ddp"}
    assert job_document.placement({**under_slurm, "stack": "slurm"}, inventory)["leaves"] == ["job.sbatch"]
    assert job_document.placement(under_slurm, inventory)["leaves"] == []
    assert placed["mounts"] == []
    with pytest.raises(ValueError, match="4 ranks at 1 per node need 4 hosts, 3 given"):
        job_document.placement({**asked, "ranks": 4}, inventory)
    with pytest.raises(ValueError, match="hosts n9 are none of the inventory's candidates"):
        job_document.placement({**asked, "hosts": ["n9"], "ranks": 1}, inventory)
    path, out = tmp_path / "request.json", tmp_path / "run" / "job.json"
    path.write_text(json.dumps(asked))
    assert cli.main(["job", "resolve", str(path), "--inventory-hosts", json.dumps(inventory), "-o", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == placed and json.loads(out.read_text()) == placed["job"]
    assert cli.main(["job", "resolve", str(path), "--inventory-hosts", "[]"]) == 2
    assert "--inventory-hosts: a JSON object of inventory name -> hostname" in capsys.readouterr().err


def test_resolve_keeps_the_job_with_the_results_unless_an_earlier_run_is_there(tmp_path, capsys):
    path, results_dir = tmp_path / "request.json", tmp_path / "results"
    path.write_text(json.dumps({k: v for k, v in request(ranks=1).items() if k != "hosts"}))
    argv = ["job", "resolve", str(path), "--inventory-hosts", json.dumps({"node-a": "n1"}), "--results-dir",
            str(results_dir)]
    assert cli.main(argv) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["earlier_run"], answer["kept"]) == (False, False) and not results_dir.exists()
    assert cli.main([*argv, "--keep"]) == 0
    answer = json.loads(capsys.readouterr().out)
    kept = results_dir / answer["job"]["run_id"] / "job.json"
    assert answer["kept"] and json.loads(kept.read_text()) == answer["job"] and kept.stat().st_mode & 0o777 == 0o600
    kept.write_text("earlier")
    assert cli.main([*argv, "--keep"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["earlier_run"], answer["kept"]) == (True, False) and kept.read_text() == "earlier"
    assert cli.main([*argv, "--keep", "--overwrite"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] and json.loads(kept.read_text())["run_id"] == answer["job"]["run_id"]
    assert cli.main(["job", "resolve", str(path), "--keep"]) == 2
    assert "--keep and --overwrite need --results-dir" in capsys.readouterr().err


def test_the_launch_options_make_the_same_document(capsys):
    assert cli.main(["launch", "--dry-run", "--run-id", "r1", "--ranks", "2", "--hosts", "n1,n2",
                     "--benchrunner", "/opt/venv/bin/benchrunner", "--env", "B=true"]) == 0
    by_options = capsys.readouterr().out
    resolved = job_document.resolve(request(ranks=2, hosts=["n1", "n2"], env={"B": "true"}))
    launched = job_document.plan(resolved).job
    assert " ".join(launched.rank_argv()) in by_options


def test_a_slurm_partition_that_does_not_exist_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # What scontrol answers for an unknown partition (stdout, exit 1: SchedMD/slurm src/scontrol/info_part.c), on a
    # cluster whose only partition is batch.
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'Partition gpu not found'\nexit 1\n")
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho batch\n")
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\ntouch {tmp_path / 'SUBMITTED'}\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job_document.resolve(request(
        stack="slurm", launcher="srun", ranks=1, slurm={"partition": "gpu"},
        nodes={"results_dir": str(tmp_path / "node"), "benchrunner": "benchrunner"}))))
    assert cli.main(["job", "launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Slurm partition 'gpu' does not exist (Partition gpu not found); the cluster's partitions: batch" in err
    assert not (tmp_path / "node").exists() and not (tmp_path / "SUBMITTED").exists()


def test_the_framework_is_the_jobs_own_key_and_recorded():
    assert job_document.resolve(request())["framework"] == "tensorflow-horovod"
    resolved = job_document.resolve(request(framework="pytorch-ddp", launcher="torchrun",
                                            workload={"channels_last": True}))
    assert resolved["framework"] == "pytorch-ddp" and resolved["workload"] == {"channels_last": True}
    job = job_document.plan(resolved).job
    assert job.framework == "pytorch-ddp" and job.workload.settings.channels_last is True
    assert job_document.resolve(json.loads(results.dumps(resolved))) == resolved


@pytest.mark.parametrize(("changes", "message"), [
    ({"workload": {"framework": "pytorch-ddp"}}, "workload: framework is the job's own key"),
    ({"framework": "jax"}, "framework.*'jax'"),
    ({"workload": {"xla": True}, "framework": "pytorch-ddp"},
     "workload setting xla belongs to tensorflow-horovod, not to this job's framework pytorch-ddp"),
    ({"workload": {"channels_last": True}},
     "workload setting channels_last belongs to pytorch-ddp and pytorch-fsdp, not to this job's framework tensorflow-horovod"),
    ({"launcher": "torchrun"}, "launcher torchrun does not start tensorflow-horovod ranks"),
    ({"launcher": "torchrun", "framework": "pytorch-ddp", "stack": "k8s"},
     "launcher torchrun does not run on stack k8s"),
])
def test_a_job_whose_framework_does_not_fit_is_refused_naming_the_key(changes, message):
    with pytest.raises(ValueError, match=message):
        job_document.resolve(request(**changes))
def mpijob_request(**kubernetes):
    return request(launcher="mpijob", stack="k8s", ranks=2, kubernetes=kubernetes)


# Each value a job's kubernetes settings put into its MPIJob, wrong by the rule the API server (or Multus) applies.
BAD_KUBERNETES = {
    "runtime_class": ("Bad Class!", "kubernetes.runtime_class 'Bad Class!' is not a RuntimeClass name, a DNS-1123 "
                                    "subdomain"),
    "namespace": ("Bench_NS", "kubernetes.namespace 'Bench_NS' is not a DNS-1123 label"),
    "results_claim": ("results claim", "kubernetes.results_claim 'results claim' is not a PersistentVolumeClaim name"),
    "network_attachment": ("default/rdma_net", "entry 'default/rdma_net' is not [namespace/]name[@interface]"),
    "image": ("registry.example.com/b:1 --privileged", "kubernetes.image 'registry.example.com/b:1 --privileged' "
                                                        "must be an image reference"),
    "shm_size": ("1 GB", "kubernetes.shm_size '1 GB' is not a Kubernetes quantity"),
    "worker_cpu": ("-2", "kubernetes.worker_cpu '-2' is not a Kubernetes quantity of 0 or more"),
    "worker_memory": ("2GiB", "kubernetes.worker_memory '2GiB' is not a Kubernetes quantity"),
    "rdma_resource": ("rdma_shared_device_a", "kubernetes.rdma_resource 'rdma_shared_device_a' has no domain"),
    "version": ("1.99.0", "Kubernetes 1.99.0: the offline validator knows 1.25.0 to"),
}


def test_every_kubernetes_value_of_an_mpijob_is_checked_all_at_once():
    with pytest.raises(ValueError) as refused:
        job_document.resolve(mpijob_request(**{key: value for key, (value, _) in BAD_KUBERNETES.items()}))
    for _, said in BAD_KUBERNETES.values():
        assert said in str(refused.value)


@pytest.mark.parametrize("key", sorted(BAD_KUBERNETES))
def test_a_kubernetes_value_the_api_server_would_refuse_is_refused_by_resolve(key):
    value, said = BAD_KUBERNETES[key]
    with pytest.raises(ValueError, match=re.escape(said)):
        job_document.resolve(mpijob_request(**{key: value}))


@pytest.mark.parametrize(("key", "value"), [
    ("runtime_class", "nvidia"), ("runtime_class", "kata.fc-2"), ("namespace", "bench-1"),
    ("results_claim", "bench.results-rwx"), ("network_attachment", "default/rdma-net@net1, ipoib-net"),
    ("image", "registry.example.com:5000/hpcml/benchrunner@sha256:" + "0" * 64), ("shm_size", "1.5Gi"),
    ("worker_cpu", "500m"), ("worker_cpu", "+2"), ("worker_memory", "1e9"), ("worker_memory", "2G"),
    ("rdma_resource", "rdma/hca_shared_devices_a"), ("version", "1.31"), ("version", "v1.33.5"),
])
def test_values_the_api_server_accepts_pass(key, value):
    assert job_document.resolve(mpijob_request(**{key: value}))["kubernetes"][key] == value


def test_the_launch_options_are_checked_like_a_document(capsys):
    assert cli.main(["launch", "--dry-run", "--launcher", "mpijob", "--stack", "k8s", "--run-id", "r1", "--ranks", "1",
                     "--runtime-class", "Bad Class!", "--worker-memory", "lots"]) == 2
    err = capsys.readouterr().err
    assert "kubernetes.runtime_class 'Bad Class!' is not a RuntimeClass name" in err
    assert "kubernetes.worker_memory 'lots' is not a Kubernetes quantity" in err and len(err.splitlines()) == 1


def test_a_release_older_than_the_validator_knows_is_refused_by_name():
    with pytest.raises(ValueError, match=re.escape("Kubernetes 1.20.0: the offline validator knows 1.25.0 to")):
        job_document.resolve(mpijob_request(version="1.20.0"))


class Started(Exception):
    """What the launcher's exec would have replaced this process with."""


@pytest.fixture
def exec_recorded(monkeypatch):
    """os.execvp raising Started with its argv, and the environment the launcher changes restored afterwards."""
    monkeypatch.setenv("PATH", os.environ["PATH"])
    monkeypatch.delenv(launchers.LAUNCHED_AT_ENV, raising=False)

    def execvp(file, argv):
        raise Started(argv)

    monkeypatch.setattr(os, "execvp", execvp)
    # The launcher started here, not in the watchdog's forked child, so that its argv reaches the test.
    monkeypatch.setattr(watchdog, "supervise", lambda start, **_: start())


def png_only(folder):
    return folder


def remove_labels(folder):
    (folder / dataset.LABELS_CSV).unlink()
    return folder


def remove_an_image(folder):
    sorted((folder / dataset.IMAGES_DIR).iterdir())[0].unlink()
    return folder


def a_file(folder):
    path = folder / "not-a-folder"
    path.write_text("")
    return path


@pytest.mark.parametrize(("data", "damage", "said"), [
    ("images", lambda folder: folder / "missing", "data_dir {path} does not exist on "),
    ("images", a_file, "data_dir {path} is not a folder on "),
    ("images", remove_labels, "{path}/Data_Entry_2017.csv: No such file or directory; images data reads the labels"),
    ("images", remove_an_image, "{path}/images: 1 of the 2 images Data_Entry_2017.csv lists are missing (first "),
    ("tfrecord", png_only, "{path}/tfrecord: 0 TFRecord shard files for 2 ranks"),
])
def test_a_dataset_that_is_not_there_is_refused_before_anything_is_written_or_started(
        tmp_path, capsys, exec_recorded, data, damage, said):
    path = damage(dataset.generate(tmp_path / "cxr", dataset.Spec(images=2, image_size=8)))
    node = tmp_path / "node"
    assert cli.main(["launch", "--run-id", "r1", "--results-dir", str(node), "--ranks", "2", "--hosts", "n1,n2",
                     "--data", data, "--data-dir", str(path)]) == 2
    err = capsys.readouterr().err
    assert said.format(path=path) in err and len(err.splitlines()) == 1, err
    assert not node.exists()


@pytest.mark.parametrize("data", ["images", "tfrecord"])
def test_a_dataset_the_play_made_is_launched_on(tmp_path, exec_recorded, data):
    folder = dataset.generate(tmp_path / "cxr", dataset.Spec(images=2, image_size=8))
    # Shards as `benchrunner dataset --tfrecord-shards 2` names them (their contents are the ranks' to read).
    for shard in range(2):
        (folder / "tfrecord").mkdir(exist_ok=True)
        (folder / "tfrecord" / f"train-{shard:05d}-of-00002.tfrecord").write_bytes(b"")
    made = {"dir": str(folder), "images": 2, "image_size": 8, "tfrecord_shards": 2}
    resolved = job_document.resolve(request(ranks=2, workload={"data": data, "data_dir": str(folder)}, dataset=made,
                                            nodes={"results_dir": str(tmp_path / "node"), "benchrunner": "benchrunner"}))
    assert resolved["dataset"] == made
    path = tmp_path / "job.json"
    path.write_text(json.dumps(resolved))
    with pytest.raises(Started) as started:
        cli.main(["job", "launch", str(path)])
    assert started.value.args[0][0] == "mpirun"
    kept = tmp_path / "node" / "r1" / "job.json"
    assert json.loads(kept.read_text()) == resolved
    # Its environment values may be private: the job's account alone reads it.
    assert oct(kept.stat().st_mode & 0o777) == "0o600"


def test_the_stall_timeout_is_the_jobs_own_else_the_default_or_half_its_timeout():
    assert job_document.resolve(request())["stall_timeout_s"] == 300
    assert job_document.resolve(request(timeout_s=100))["stall_timeout_s"] == 50
    assert job_document.resolve(request(stall_timeout_s=42))["stall_timeout_s"] == 42
    # A job resolved before there was one is launched with what it would have got.
    resolved = job_document.resolve(request(ranks=2))
    del resolved["stall_timeout_s"], resolved["startup_timeout_s"]
    assert job_document.launch_plan(resolved).limits == watchdog.Limits(timeout_s=3600, stall_timeout_s=300,
                                                                        startup_timeout_s=300)


def test_the_startup_timeout_is_the_jobs_own_else_its_stall_timeout():
    assert job_document.resolve(request(stall_timeout_s=42))["startup_timeout_s"] == 42
    assert job_document.resolve(request(timeout_s=100))["startup_timeout_s"] == 50
    own = job_document.resolve(request(ranks=2, stall_timeout_s=30, startup_timeout_s=600))
    assert (own["stall_timeout_s"], own["startup_timeout_s"]) == (30, 600)
    assert job_document.launch_plan(own).limits == watchdog.Limits(timeout_s=3600, stall_timeout_s=30,
                                                                   startup_timeout_s=600)


@pytest.mark.parametrize(("launcher", "hosts", "watched"), [("mpirun", "n1,n2", True), ("torchrun", "n1,n2", True),
                                                           ("srun", "", False)])
def test_a_launcher_whose_ranks_beat_here_runs_watched_with_the_jobs_limits(tmp_path, monkeypatch, launcher, hosts,
                                                                            watched):
    """Watched on the launching node, or (srun) handed the limits for the watchdog inside its job."""
    watches = []
    monkeypatch.setenv("PATH", os.environ["PATH"])
    monkeypatch.delenv(launchers.LAUNCHED_AT_ENV, raising=False)
    monkeypatch.setattr(watchdog, "supervise", lambda start, **given: watches.append(given) or 0)
    started = []
    monkeypatch.setattr(launchers.get(launcher), "start",
                        lambda job, settings, options, limits: started.append((job, limits)) or 0)
    stack = "slurm" if launcher == "srun" else "baremetal"
    framework = ["--framework", "pytorch-ddp"] if launcher == "torchrun" else []
    assert cli.main(["launch", "--run-id", "r1", "--results-dir", str(tmp_path), "--ranks", "2", "--hosts", hosts,
                     "--launcher", launcher, "--stack", stack, *framework, "--timeout", "600",
                     "--stall-timeout", "60"]) == 0
    if watched:
        assert watches == [{"run_id": "r1", "run_dir": tmp_path / "r1", "ranks": 2,
                            "limits": watchdog.Limits(timeout_s=600, stall_timeout_s=60)}] and started == []
    else:
        assert watches == [] and [limits for _, limits in started] == [watchdog.Limits(timeout_s=600, stall_timeout_s=60)]
