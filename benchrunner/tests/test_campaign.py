import json
from pathlib import Path

import pytest
import yaml

from benchrunner import campaign, cli, job_document, kubernetes, launchers, playbooks, results, summary
from documents import rank_document

LAB = {
    "name": "lab",
    "repeats": 3,
    "gpus": [2, 1],
    "workloads": {"model": ["small_cnn", "densenet121_chexnet"], "data": ["synthetic", "images"]},
    "fixed": {"image_size": 32, "measured_steps": 10},
    "allreduce": {"max_bytes": 1048576},
}


@pytest.fixture
def campaign_file(tmp_path):
    def write(document=None):
        path = tmp_path / "campaign.yml"
        path.write_text(yaml.safe_dump(document or LAB))
        return path
    return write


class Recorder:
    """An executor that fails the runs it is told to and records what it was asked to run."""

    def __init__(self, failing=()):
        self.failing = set(failing)
        self.calls = []

    def __call__(self, run):
        self.calls.append(run.run_id)
        if run.run_id in self.failing:
            return campaign.Attempt(False, "lab-node2: UNREACHABLE")
        return campaign.Attempt(True)


def test_matrix_expands_every_axis_gpu_count_and_repeat(campaign_file):
    document = campaign.load(campaign_file())
    points = campaign.points(document)
    training = [p for p in points if p["program"] == "train"]
    assert len(training) == 2 * 2 * 2 and len(points) == 8 + 2
    assert [p["gpus"] for p in points[:2]] == [1, 2] and points[0]["program"] == "allreduce"
    real = [p for p in training if p["workload"]["data"] == "images"]
    assert real and all("data_dir" not in p["workload"] for p in real)
    run_ids = [r.run_id for r in campaign.plan(document)]
    assert len(run_ids) == len(set(run_ids)) == 30
    assert run_ids == [r.run_id for r in campaign.plan(campaign.load(campaign_file()))]


@pytest.mark.parametrize(("change", "message"), [
    ({"gpus": [0]}, "at gpus/0"),
    ({"stacks": ["openstack"]}, "at stacks/0"),
    ({"colour": "blue"}, "Additional properties are not allowed"),
    ({"workloads": {"model": ["alexnet"]}}, "point train-alexnet.*model 'alexnet' is not one of"),
    ({"workloads": {"epochs": [1]}}, "unknown workload settings: epochs"),
    ({"workloads": {"batch_size": [32, 32]}}, "at workloads/batch_size: .* has non-unique elements"),
    ({"stacks": ["baremetal", "k8s"], "launchers": {"k8s": "srun"}}, "launcher srun does not run on stack k8s"),
    ({"fixed": {"data_dir": "datasets/cxr"}, "workloads": {"data": ["images"]}},
     "data directory 'datasets/cxr' must be an absolute path"),
])
def test_bad_campaigns_fail_before_anything_runs(campaign_file, change, message):
    with pytest.raises(results.ResultError, match=message):
        campaign.load(campaign_file({**LAB, **change}))


def test_failures_are_recorded_with_their_reason_and_the_campaign_goes_on(campaign_file, tmp_path):
    document = campaign.load(campaign_file())
    planned = campaign.plan(document)
    broken = {r.run_id for r in planned if r.point["gpus"] == 2 and r.point["program"] == "train"}
    executor = Recorder(failing=broken)
    state = campaign.run(document, tmp_path / "campaign.yml", tmp_path / "results", executor, progress=lambda _: None)
    assert len(executor.calls) == 30
    assert campaign.counts(state, planned) == {"done": 18, "failed": 12, "pending": 0}
    saved = results.load(results.CAMPAIGN_STATE, tmp_path / "results" / "campaigns" / "lab" / "state.json")
    assert {saved["runs"][r]["reason"] for r in broken} == {"lab-node2: UNREACHABLE"}


def test_rerun_does_only_what_is_missing_or_failed(campaign_file, tmp_path):
    document = campaign.load(campaign_file())
    planned = campaign.plan(document)
    first = Recorder(failing={planned[4].run_id})
    campaign.run(document, tmp_path / "c.yml", tmp_path, first, progress=lambda _: None)
    again = Recorder()
    state = campaign.run(document, tmp_path / "c.yml", tmp_path, again, progress=lambda _: None)
    assert again.calls == [planned[4].run_id]
    assert state.runs[planned[4].run_id]["attempts"] == 2 and state.runs[planned[4].run_id]["status"] == "done"


def test_an_interrupted_campaign_keeps_what_it_measured(campaign_file, tmp_path):
    document = campaign.load(campaign_file())
    planned = campaign.plan(document)

    def stop_at_third(run):
        if run.run_id == planned[2].run_id:
            raise KeyboardInterrupt
        return campaign.Attempt(True)

    with pytest.raises(KeyboardInterrupt):
        campaign.run(document, tmp_path / "c.yml", tmp_path, stop_at_third, progress=lambda _: None)
    state = json.loads((tmp_path / "campaigns" / "lab" / "state.json").read_text())
    assert [state["runs"][r.run_id]["status"] for r in planned[:3]] == ["done", "done", "failed"]
    assert state["runs"][planned[2].run_id]["reason"] == "interrupted"


def test_a_run_hands_the_play_its_job_and_the_campaign_s_own_variables(campaign_file):
    document = campaign.load(campaign_file({**LAB, "stacks": ["k8s"], "extra_vars": {"benchrunner_timeout_s": 60}}))
    run = next(r for r in campaign.plan(document) if r.point["program"] == "train")
    variables = campaign.extravars(run, document)
    # One variable carries the run's job; no other benchrunner_* copy of it.
    assert variables == {"cluster_stack": "k8s", "benchrunner_timeout_s": 60, "benchrunner_job": variables["benchrunner_job"],
                         "benchrunner_container": "none"}
    job = variables["benchrunner_job"]
    assert job["run_id"] == run.run_id and job["launcher"] == "mpijob" and job["ranks"] == 1
    assert job["workload"] == run.point["workload"]
    # What the play adds (hosts, the nodes' paths) completes it into a valid job.
    resolved = job_document.resolve({"kind": "job", "schema_version": 1, "hosts": ["lab-node1"], **job})
    assert resolved["workload"] == run.point["workload"]


def test_outcome_is_judged_by_what_reached_the_control_host(tmp_path, run_dir, make_rank):
    directory = run_dir(make_rank(0), make_rank(1))
    assert not campaign.run_outcome(directory.parent, "run-1").ok
    summary.write(directory)
    assert campaign.run_outcome(directory.parent, "run-1").ok
    assert "no valid summary" in campaign.run_outcome(directory.parent, "missing").reason


def test_every_kubernetes_point_gets_a_valid_mpijob(tmp_path, capsys):
    path = tmp_path / "study.yml"
    path.write_text(yaml.safe_dump({**LAB, "stacks": ["slurm", "k8s"], "network": "rdma", "gpus": [4, 8],
                                    "gpus_per_node": 4, "repeats": 2}))
    out = tmp_path / "mpijobs"
    assert cli.main(["campaign", str(path), "--mpijobs", str(out), "--image", "registry.example.com/b:1",
                     "--network-attachment", "default/rdma-net", "--rdma-resource", "rdma/hca_shared"]) == 0
    document = campaign.load(path)
    k8s_runs = [r for r in campaign.plan(document) if r.point["stack"] == "k8s"]
    assert sorted(p.stem for p in out.iterdir()) == sorted(r.run_id for r in k8s_runs) and len(k8s_runs) == 20
    for run_ in k8s_runs:
        manifest = yaml.safe_load((out / f"{run_.run_id}.yaml").read_text())
        kubernetes.validate(manifest)
        spec = manifest["spec"]
        assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == run_.point["gpus"] // 4
        launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
        assert run_.point["program"] in launcher and run_.run_id in launcher
    assert "20 MPIJobs written" in capsys.readouterr().out


def test_a_campaign_without_kubernetes_has_no_mpijobs(campaign_file, tmp_path, capsys):
    assert cli.main(["campaign", str(campaign_file()), "--mpijobs", str(tmp_path / "m")]) == 2
    assert "has no Kubernetes runs" in capsys.readouterr().err


@pytest.mark.parametrize(("limit", "played_limit"), [(None, None), ("lab-node2", "localhost,lab-node2")])
def test_a_run_is_the_benchmark_play_alone(campaign_file, tmp_path, monkeypatch, limit, played_limit):
    # No ping first and no site.yml: the play itself drops the nodes that do not answer and resolves the run's job
    # among the others, once.
    document = campaign.load(campaign_file({**LAB, "gpus": [1], "repeats": 1, "workloads": {"data": ["synthetic"]}}))
    (run_,) = [r for r in campaign.plan(document) if r.point["program"] == "train"]
    played = []
    monkeypatch.setattr(playbooks, "run", lambda *_, **kw: played.append(kw) or playbooks.Outcome(2, "failed",
                                                                                                  failures=["x"]))
    attempt = campaign.playbook_executor(tmp_path, tmp_path / "results", document, limit=limit)(run_)
    assert [(kw["playbook"], kw["limit"], kw.get("tags")) for kw in played] == [
        (playbooks.BENCHMARK_PLAYBOOK, played_limit, None)]
    assert played[0]["extravars"]["benchrunner_job"]["run_id"] == run_.run_id
    assert attempt == campaign.Attempt(False, "x")


def test_runs_go_in_randomized_rounds_recorded_in_the_state(campaign_file, tmp_path):
    document = campaign.load(campaign_file({**LAB, "stacks": ["baremetal", "k8s"], "seed": 7}))
    executor = Recorder()
    state = campaign.run(document, tmp_path / "campaign.yml", tmp_path / "results", executor, progress=lambda _: None)
    planned = {r.run_id: r for r in campaign.plan(document)}
    points = len(planned) // 3
    # Every repeat round holds every point once; rounds follow each other; within one the order is shuffled.
    rounds = [executor.calls[i * points:(i + 1) * points] for i in range(3)]
    assert [{planned[r].repeat for r in round_} for round_ in rounds] == [{1}, {2}, {3}]
    assert [r for r in executor.calls if planned[r].repeat == 1] != [r.run_id for r in planned.values()
                                                                      if r.repeat == 1]
    assert {planned[r].point["stack"] for r in rounds[0][:4]} == {"baremetal", "k8s"}
    assert state.document["order"] == {"seed": 7, "run_ids": executor.calls}
    assert executor.calls == [r.run_id for r in campaign.schedule(document, 7)]
    assert executor.calls != [r.run_id for r in campaign.schedule(document, 8)]


def test_a_resumed_campaign_keeps_its_recorded_order(campaign_file, tmp_path):
    document = campaign.load(campaign_file())  # no seed: one is drawn and kept
    first = Recorder(failing=set())
    results_dir = tmp_path / "results"
    state = campaign.run(document, tmp_path / "campaign.yml", results_dir, Recorder(failing={"x"}),
                         progress=lambda _: None)
    order = state.order
    assert sorted(order) == sorted(r.run_id for r in campaign.plan(document))
    # Fail a third of them, then resume: the rerun goes through the failures in the recorded order.
    path = results_dir / "campaigns" / "lab" / "state.json"
    saved = json.loads(path.read_text())
    for run_id in order[::3]:
        saved["runs"][run_id]["status"] = "failed"
    path.write_text(json.dumps(saved))
    campaign.run(document, tmp_path / "campaign.yml", results_dir, first, progress=lambda _: None)
    assert first.calls == order[::3]


def test_the_campaign_command_ends_with_its_report(campaign_file, tmp_path, monkeypatch, capsys):
    document = {key: value for key, value in LAB.items() if key != "allreduce"} | {
        "repeats": 2, "gpus": [1], "workloads": {"data": ["synthetic"]}}
    results_dir = tmp_path / "results"

    def executor(*_, **__):
        def execute(run_):
            results.save(results.RANK_RESULT, rank_document(0, 1, run_id=run_.run_id),
                         results_dir / run_.run_id / "raw" / "rank-00000.json")
            # As the benchmark play summarizes a campaign's run: without its plot.
            summary.write(results_dir / run_.run_id, plots=False)
            return campaign.run_outcome(results_dir, run_.run_id)
        return execute

    monkeypatch.setenv("HPCML_PROJECT_DIR", str(tmp_path))
    monkeypatch.setattr(campaign, "playbook_executor", executor)
    assert cli.main(["campaign", str(campaign_file(document)), "--results-dir", str(results_dir)]) == 0
    out, err = capsys.readouterr()
    assert "Campaign lab: 2 runs done, 0 failed." in out
    assert (results_dir / "campaigns" / "lab" / "report.html").is_file()
    # Every run's report is complete at the campaign's end: its plot drawn there, once for the campaign.
    runs = [path.parent for path in results_dir.glob("lab.*/summary.json")]
    assert len(runs) == 2 and "drew the plots of 2 run report(s)" in err
    for run in runs:
        assert (run / "plots" / "loss.png").is_file() and "not drawn yet" not in (run / "report.md").read_text()


def test_a_campaign_s_runs_are_summarized_without_their_plots(tmp_path, monkeypatch):
    document = campaign.load(Path(__file__).parents[1] / "campaigns" / "lab.yml")
    seen = {}

    def run(project, **kwargs):
        seen.update(kwargs["extravars"])
        return playbooks.Outcome(0, "successful")

    monkeypatch.setattr(playbooks, "run", run)
    campaign.playbook_executor(tmp_path, tmp_path / "results", document)(campaign.plan(document)[0])
    assert seen["benchrunner_run_plots"] is False


def test_frameworks_and_a_stacks_launchers_are_axes(campaign_file):
    document = campaign.load(campaign_file({**LAB, "frameworks": ["tensorflow-horovod", "pytorch-ddp"],
                                            "launchers": {"baremetal": ["mpirun", "torchrun", "horovodrun"]}}))
    training = [p for p in campaign.points(document) if p["program"] == "train"]
    placed = sorted({(campaign.framework(p), p["launcher"]) for p in training})
    # torchrun starts PyTorch's ranks only, horovodrun Horovod's: four placements, not six.
    assert placed == [("pytorch-ddp", "mpirun"), ("pytorch-ddp", "torchrun"),
                      ("tensorflow-horovod", "horovodrun"), ("tensorflow-horovod", "mpirun")]
    assert len(training) == 4 * 2 * 2 * 2
    torch_run = next(r for r in campaign.plan(document) if campaign.framework(r.point) == "pytorch-ddp")
    assert campaign.job_request(torch_run, document)["framework"] == "pytorch-ddp"
    assert "pytorch-ddp" in torch_run.run_id


def test_torchrun_under_slurm_is_one_of_the_slurm_stacks_launchers(campaign_file):
    document = campaign.load(campaign_file({**LAB, "stacks": ["slurm"], "frameworks": ["tensorflow-horovod", "pytorch-ddp"],
                                            "launchers": {"slurm": ["srun", "torchrun"]}}))
    training = [p for p in campaign.points(document) if p["program"] == "train"]
    placed = sorted({(p["stack"], campaign.framework(p), p["launcher"]) for p in training})
    # torchrun starts PyTorch's ranks only, under Slurm as on bare metal.
    assert placed == [("slurm", "pytorch-ddp", "srun"), ("slurm", "pytorch-ddp", "torchrun"),
                      ("slurm", "tensorflow-horovod", "srun")]
    torch_runs = [r for r in campaign.plan(document) if r.point["launcher"] == "torchrun"]
    assert torch_runs and all("torchrun" in r.run_id for r in torch_runs)
    # Each resolves to a job torchrun starts in a batch job, leaving its script with the results.
    resolved = job_document.resolve(campaign.full_request(torch_runs[0], document), torch_runs[0].run_id)
    assert (resolved["stack"], resolved["launcher"], resolved["framework"]) == ("slurm", "torchrun", "pytorch-ddp")
    assert launchers.on_stack("torchrun", "slurm").leaves == ("job.sbatch",)


def test_a_campaign_keeps_its_run_ids_when_it_names_the_default_framework(campaign_file):
    before = [r.run_id for r in campaign.plan(campaign.load(campaign_file()))]
    named = campaign.load(campaign_file({**LAB, "frameworks": ["tensorflow-horovod"]}))
    assert [r.run_id for r in campaign.plan(named)] == before


def test_a_framework_no_launcher_of_a_stack_starts_is_refused(campaign_file):
    with pytest.raises(results.ResultError, match="no launcher of stack baremetal \\(torchrun\\) starts "
                                                  "tensorflow-horovod ranks"):
        campaign.load(campaign_file({**LAB, "launchers": {"baremetal": "torchrun"}}))


@pytest.fixture
def containers(monkeypatch):
    """A narrower registry than the real one: srun and mpirun start ranks in Charliecloud, srun in Enroot too; no other
    launcher in any container."""
    for name, launcher in launchers.registry().items():
        runtimes = {"srun": ("charliecloud", "enroot"), "mpirun": ("charliecloud",)}.get(name, ())
        monkeypatch.setattr(type(launcher), "containers", runtimes)


def test_containers_are_an_axis_on_the_launchers_that_start_ranks_in_them(campaign_file, containers):
    document = campaign.load(campaign_file({**LAB, "repeats": 1, "gpus": [2], "workloads": {"model": ["small_cnn"]},
                                            "stacks": ["baremetal", "slurm", "k8s"],
                                            "containers": ["none", "charliecloud", "enroot"]}))
    training = [p for p in campaign.points(document) if p["program"] == "train"]
    placed = sorted({(p["stack"], p["launcher"], campaign.container(p)) for p in training})
    # The MPIJob starts no container of these; mpirun no Enroot.
    assert placed == [("baremetal", "mpirun", "charliecloud"), ("baremetal", "mpirun", "none"),
                      ("k8s", "mpijob", "none"), ("slurm", "srun", "charliecloud"), ("slurm", "srun", "enroot"),
                      ("slurm", "srun", "none")]
    assert len(training) == 6
    runs = campaign.plan(document)
    assert len({r.run_id for r in runs}) == len(runs)
    # Each run hands the play its container, by runtime name; the run id says which.
    handed = {}
    for run in runs:
        variables = campaign.extravars(run, document)
        assert "container" not in variables["benchrunner_job"]  # the play makes it, with the image it prepared
        runtime = variables["benchrunner_container"]
        handed.setdefault((run.point["stack"], run.point["launcher"], runtime), []).append(run.run_id)
        named = [name for name in ("charliecloud", "enroot") if f"-{name}-" in run.run_id]
        assert named == ([] if runtime == "none" else [runtime])
    # An allreduce sweep and a training point each.
    assert sorted(handed) == placed
    assert {key: len(ids) for key, ids in handed.items()} == dict.fromkeys(placed, 2)


def test_a_campaign_keeps_its_run_ids_whether_or_not_it_crosses_containers(containers):
    before = [r.run_id for r in campaign.plan(LAB)]
    # As benchrunner named them before containers were an axis: a resumed campaign finds its runs.
    assert before[0] == "lab.allreduce-g1-baremetal-4d4525eb.r1"
    assert before[-1] == "lab.train-densenet121_chexnet-images-b32-g2-baremetal-c2d963fd.r3"
    assert [r.run_id for r in campaign.plan({**LAB, "containers": ["none"]})] == before
    # Crossed with a container, the virtualenv's runs are those it had: only the container's are new.
    crossed = campaign.plan({**LAB, "containers": ["none", "charliecloud"]})
    assert [r.run_id for r in crossed if "container" not in r.point] == before
    assert len(crossed) == 2 * len(before)


@pytest.mark.parametrize(("change", "message"), [
    ({"containers": ["docker"]}, "containers: 'docker' is not a container runtime benchrunner knows: none, apptainer, "
                                 "charliecloud, enroot"),
    ({"containers": ["none", "enroot"]}, r"no launcher of the campaign \(mpirun\) starts tensorflow-horovod ranks in "
                                         r"enroot: add one that does \(those that do: srun\)"),
    ({"stacks": ["k8s"], "containers": ["enroot"]}, r"no launcher of the campaign \(mpijob\) starts tensorflow-horovod "
                                                    r"ranks in enroot: add one that does \(those that do: srun\)"),
])
def test_a_container_no_launcher_can_start_is_refused_before_anything_runs(campaign_file, containers, change, message):
    with pytest.raises(results.ResultError, match=message):
        campaign.load(campaign_file({**LAB, **change}))


@pytest.mark.parametrize("name", ["lab.yml", "gpu-cluster.yml"])
def test_the_shipped_campaigns_load_and_cross_both_frameworks(name):
    path = Path(__file__).resolve().parents[1] / "campaigns" / name
    document = campaign.load(path)
    trained = {campaign.framework(p) for p in campaign.points(document) if p["program"] == "train"}
    assert trained == {"tensorflow-horovod", "pytorch-ddp"}


def test_models_of_both_kinds_cross_only_the_frameworks_and_settings_that_take_them(campaign_file):
    document = campaign.load(campaign_file({
        "name": "kinds", "repeats": 1, "gpus": [2], "frameworks": ["tensorflow-horovod", "pytorch-ddp"],
        "workloads": {"model": ["small_cnn", "llama-tiny"], "sequence_length": [128, 256]},
        "fixed": {"image_size": 32, "measured_steps": 10}}))
    trained = [(campaign.framework(p), p["workload"]["model"], p["workload"].get("sequence_length"),
                p["workload"].get("image_size")) for p in campaign.points(document)]
    # The image model once per framework, without a sequence length; the transformer under PyTorch only, once per
    # sequence length and without an image size.
    assert sorted(trained, key=str) == sorted([
        ("tensorflow-horovod", "small_cnn", None, 32), ("pytorch-ddp", "small_cnn", None, 32),
        ("pytorch-ddp", "llama-tiny", 128, None), ("pytorch-ddp", "llama-tiny", 256, None)], key=str)
    labels = [r.run_id for r in campaign.plan(document)]
    assert len(set(labels)) == 4 and any("llama-tiny-synthetic-b32-s128" in label for label in labels)
