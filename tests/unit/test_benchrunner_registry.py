"""The launcher and framework registries are the one list: the schemas' enums and the role's choices follow them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from benchrunner import cli, frameworks, launchers, results
from benchrunner.job_defaults import DEFAULT_DATASET, DEFAULTS
from benchrunner.launchers import mpijob

ROLE = Path(__file__).resolve().parents[2] / "roles" / "benchrunner"
ROLE_SPECS = ROLE / "meta" / "argument_specs.yml"
# The role's variables that set a job key benchrunner has a default for, and that key: unset, they are left out of
# the request (`| default(none)` in vars/main.yml), so benchrunner's default applies.
LEFT_TO_BENCHRUNNER = {
    "benchrunner_framework": ("framework",), "benchrunner_allreduce": ("allreduce",), "benchrunner_env": ("env",),
    "benchrunner_launcher_args": ("launcher_args",), "benchrunner_timeout_s": ("timeout_s",),
    "benchrunner_stall_timeout_s": ("stall_timeout_s",),
    "benchrunner_node_results_dir": ("nodes", "results_dir"), "benchrunner_slurm_partition": ("slurm", "partition"),
    "benchrunner_slurm_mpi": ("slurm", "mpi"), "benchrunner_image": ("kubernetes", "image"),
    "benchrunner_namespace": ("kubernetes", "namespace"),
    "benchrunner_network_attachment": ("kubernetes", "network_attachment"),
    "benchrunner_runtime_class": ("kubernetes", "runtime_class"), "benchrunner_shm_size": ("kubernetes", "shm_size"),
    "benchrunner_worker_cpu": ("kubernetes", "worker_cpu"), "benchrunner_worker_memory": ("kubernetes", "worker_memory"),
    "benchrunner_dataset_dir": ("dataset", "dir"), "benchrunner_dataset_images": ("dataset", "images"),
    "benchrunner_dataset_image_size": ("dataset", "image_size"),
    "benchrunner_dataset_tfrecord_shards": ("dataset", "tfrecord_shards"),
}
# Role defaults named like a job default that are the inventory's values, not a second default: the RDMA resource
# the kubernetes_resources role's device plugin advertises.
CLUSTER_VALUES = {"benchrunner_rdma_resource"}


def role_options() -> dict:
    return yaml.safe_load(ROLE_SPECS.read_text())["argument_specs"]["main"]["options"]


def test_the_schemas_name_exactly_the_registered_launchers_and_frameworks():
    defs = results.schema(results.CAMPAIGN)["$defs"]
    assert sorted(defs["launcher"]["enum"]) == sorted(launchers.names())
    assert sorted(defs["framework"]["enum"]) == sorted(frameworks.names())
    rank = results.schema(results.RANK_RESULT)
    # The result and its workload name the framework through one definition.
    assert sorted(rank["$defs"]["framework"]["enum"]) == sorted(frameworks.names())
    framework = {"$ref": "#/$defs/framework"}
    assert rank["properties"]["framework"].items() >= framework.items()
    assert rank["$defs"]["workload"]["properties"]["framework"] == framework
    assert sorted(results.schema(results.ALLREDUCE_RESULT)["properties"]["framework"]["enum"]) == sorted(
        frameworks.names())


def test_the_role_offers_exactly_the_registered_launchers_and_frameworks():
    options = role_options()
    assert sorted(options["benchrunner_launcher"]["choices"]) == sorted(launchers.names())
    assert sorted(options["benchrunner_framework"]["choices"]) == sorted(frameworks.names())
    # Unset, the framework is benchrunner's default: the role does not restate it.
    assert "default" not in options["benchrunner_framework"]


def test_every_framework_setting_is_recorded_by_the_rank_result_schema():
    workload = results.schema(results.RANK_RESULT)["$defs"]["workload"]["properties"]
    for name in frameworks.names():
        assert set(frameworks.setting_names(name)) <= set(workload), name


def test_every_launcher_declares_its_contract():
    for name in launchers.names():
        module = launchers.get(name)
        assert set(module.STACKS) <= {"baremetal", "slurm", "k8s"}, name
        assert set(module.FRAMEWORKS) <= set(frameworks.names()) and module.FRAMEWORKS, name
        assert isinstance(module.USES_HOSTS, bool) and isinstance(module.BEATS, bool), name
        # Declared once or per stack (for each of its stacks, no other).
        for attribute in ("NEEDS", "LEAVES", "WATCHED_IN_JOB"):
            value = getattr(module, attribute)
            assert not isinstance(value, dict) or set(value) == set(module.STACKS), (name, attribute)
        for stack in module.STACKS:
            contract = launchers.on_stack(name, stack)
            assert contract.needs <= {"hosts", "slurm", "kubeconfig"}, (name, stack)
            assert isinstance(contract.leaves, tuple), (name, stack)
            # Watched inside its job only where its ranks beat.
            assert contract.watched_in_job in (False, module.BEATS), (name, stack)
        assert module.start is None or callable(module.start), name
    # Each stack has exactly one default launcher, and it runs there.
    for stack in launchers.STACKS:
        owners = [n for n in launchers.names() if stack in launchers.get(n).DEFAULT_FOR]
        assert len(owners) == 1 and stack in launchers.stacks_of(owners[0]), stack


def test_every_framework_declares_its_contract():
    for name in frameworks.names():
        module = frameworks.get(name)
        for entry in ("train", "allreduce", "rank_environment", "versions", "model_settings", "input_settings"):
            assert callable(getattr(module, entry)), (name, entry)
        assert set(module.BEFORE_RECORDED) <= set(frameworks.setting_names(name)), name


def test_a_setting_of_several_frameworks_is_declared_once_by_a_settings_class_they_all_extend():
    for setting in {setting for name in frameworks.names() for setting in frameworks.setting_names(name)}:
        owners = [frameworks.get(name).Settings for name in frameworks.owners_of(setting)]
        shared = set.intersection(*(set(owner.__mro__) for owner in owners))
        declaring = [base for base in shared if setting in getattr(base, "__annotations__", {})]
        assert len(declaring) == 1, (setting, [owner.__module__ for owner in owners])


def _leaf_names(mapping: dict, prefix: str = "") -> set[str]:
    names = set()
    for key, value in mapping.items():
        names |= {key, prefix + key}
        if isinstance(value, dict):
            names |= _leaf_names(value, f"{key}_")
    return names


def _schema_defaults(node) -> list:
    if isinstance(node, dict):
        return (["default"] if "default" in node else []) + [d for v in node.values() for d in _schema_defaults(v)]
    return [d for v in node for d in _schema_defaults(v)] if isinstance(node, list) else []


def test_the_jobs_defaults_live_in_benchrunner_only():
    options = role_options()
    role_defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    request = (ROLE / "vars" / "main.yml").read_text()
    jobs = {**DEFAULTS, "dataset": DEFAULT_DATASET}
    for variable, path in LEFT_TO_BENCHRUNNER.items():
        assert variable not in role_defaults and "default" not in options[variable], variable
        value = jobs
        for key in path:
            value = value[key]  # a key benchrunner has a default for
    # The request leaves out exactly these when unset.
    assert set(re.findall(r"(benchrunner_\w+) \| default\(none\)", request)) == set(LEFT_TO_BENCHRUNNER)
    # No other role default is named like one of the job's.
    named_like = {"benchrunner_" + name for name in _leaf_names(jobs) | {"node_results_dir"}}
    assert sorted(set(role_defaults) & named_like - CLUSTER_VALUES) == []
    # The schema holds none, and what reads a default reads benchrunner's.
    assert _schema_defaults(results.schema(results.JOB)) == []
    pods = mpijob.PodSettings()
    assert {k: getattr(pods, k) for k in ("shm_size", "worker_cpu", "worker_memory", "rdma_resource")} == {
        k: DEFAULTS["kubernetes"][k] for k in ("shm_size", "worker_cpu", "worker_memory", "rdma_resource")}
    launch = cli.build_parser().parse_args(["launch", "--run-id", "r", "--ranks", "1"])
    assert (launch.slurm_mpi, launch.timeout, launch.results_dir, launch.image, launch.shm_size) == (
        DEFAULTS["slurm"]["mpi"], DEFAULTS["timeout_s"], DEFAULTS["nodes"]["results_dir"],
        DEFAULTS["kubernetes"]["image"], DEFAULTS["kubernetes"]["shm_size"])
