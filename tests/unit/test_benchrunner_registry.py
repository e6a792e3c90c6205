"""The launcher, framework and container runtime registries are the one list: the schemas' enums and the role's
choices follow them."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from benchrunner import cli, containers, frameworks, launchers, results
from benchrunner.job_defaults import DEFAULT_DATASET, DEFAULTS

PROJECT = Path(__file__).resolve().parents[2]
ROLE = PROJECT / "roles" / "benchrunner"
ROLE_SPECS = ROLE / "meta" / "argument_specs.yml"
ROLE_VARS = ROLE / "vars" / "main.yml"
PACKAGE = PROJECT / "benchrunner" / "src" / "benchrunner"
LAUNCHERS = PACKAGE / "launchers"
# The role's variables that set a job key benchrunner has a default for, and that key: unset, they are left out of
# the request (`| default(none)` in vars/main.yml), so benchrunner's default applies.
LEFT_TO_BENCHRUNNER = {
    "benchrunner_framework": ("framework",), "benchrunner_allreduce": ("allreduce",), "benchrunner_env": ("env",),
    "benchrunner_launcher_args": ("launcher_args",), "benchrunner_timeout_s": ("timeout_s",),
    "benchrunner_stall_timeout_s": ("stall_timeout_s",), "benchrunner_startup_timeout_s": ("startup_timeout_s",),
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
# Job keys whose default is another key's value (job_document resolves them), not one of DEFAULTS.
DERIVED = {"startup_timeout_s": "stall_timeout_s"}
# Role defaults named like a job default that are the inventory's values, not a second default: the RDMA resource
# the kubernetes_resources role's device plugin advertises.
CLUSTER_VALUES = {"benchrunner_rdma_resource"}


def role_options() -> dict:
    return yaml.safe_load(ROLE_SPECS.read_text())["argument_specs"]["main"]["options"]


def _generator():
    spec = importlib.util.spec_from_file_location("registry_enums", PROJECT / "tools" / "registry_enums.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schemas_enums_and_the_roles_choices_are_what_make_docs_writes_from_the_registries():
    stale = [str(path.relative_to(PROJECT)) for path, text in _generator().rendered().items() if path.read_text() != text]
    assert stale == [], "run `make docs`"
    # The result and its workload name the framework through one definition.
    rank = results.schema(results.RANK_RESULT)
    framework = {"$ref": "#/$defs/framework"}
    assert rank["properties"]["framework"].items() >= framework.items()
    assert rank["$defs"]["workload"]["properties"]["framework"] == framework
    # Unset, the framework is benchrunner's default: the role does not restate it.
    assert "default" not in role_options()["benchrunner_framework"]


def test_make_docs_writes_a_new_launcher_framework_and_runtime_into_every_list(monkeypatch):
    monkeypatch.setitem(launchers.registry(), "zlauncher", launchers.get("mpirun"))
    monkeypatch.setitem(containers.registry(), "zruntime", containers.get("apptainer"))
    monkeypatch.setattr(frameworks, "names", lambda: ("pytorch-ddp", "zframework"))
    generator = _generator()
    texts = generator.rendered()
    for kind, path, names in generator.SCHEMA_ENUMS:
        listed = json.loads(texts[generator._schema_file(kind)])
        for key in path:
            listed = listed[key]
        assert listed["enum"] == list(names()) and listed["enum"][-1] in ("zlauncher", "zframework", "zruntime"), (
            kind, path)
    options = yaml.safe_load(texts[ROLE_SPECS])["argument_specs"]["main"]["options"]
    assert options["benchrunner_launcher"]["choices"] == [*launchers.names()] and "zlauncher" in launchers.names()
    assert options["benchrunner_framework"]["choices"] == ["pytorch-ddp", "zframework"]
    # Only the lists changed.
    before, after = ROLE_SPECS.read_text().splitlines(), texts[ROLE_SPECS].splitlines()
    assert len(before) == len(after)
    assert [new.strip() for old, new in zip(before, after) if old != new] == [
        f"choices: [{', '.join(launchers.names())}]", "choices: [pytorch-ddp, zframework]",
        f"choices: [none, {', '.join(containers.names())}]"]
    # The role's launcher facts gain its block, and nothing else of the role's vars changes.
    facts = yaml.safe_load(texts[ROLE_VARS])[generator.LAUNCHER_FACTS]
    assert list(facts) == [*launchers.names()] and facts["zlauncher"] == facts["mpirun"]
    block = f"\n{generator.LAUNCHER_FACTS}:\n"
    assert texts[ROLE_VARS].split(block)[0] == ROLE_VARS.read_text().split(block)[0]


class _OwnSettings(launchers.Launcher):
    """A launcher with settings of its own, as a contributor would add one: one class."""

    name = "zlauncher"
    stacks = ("baremetal",)
    frameworks = ("pytorch-ddp",)
    rank_variables = None
    needs = frozenset({"hosts"})
    settings_key = "zkey"

    @dataclasses.dataclass(frozen=True)
    class Settings:
        queue: str = "batch"
        account: str | None = None
        port: int = dataclasses.field(default=29500, metadata={launchers.SCHEMA: {"minimum": 1, "maximum": 65535}})
        exclusive: bool = True
        grace_s: float = 2.5
        release: str = dataclasses.field(default="1.0", metadata={launchers.NULL_IS_DEFAULT: True, launchers.SCHEMA: {
            "description": "null: 1.0"}})


def test_make_docs_writes_a_new_launchers_settings_into_the_job_schema_from_its_class(monkeypatch):
    monkeypatch.setitem(launchers.registry(), "zlauncher", _OwnSettings())
    schema = json.loads(_generator().rendered()[_generator()._schema_file(results.JOB)])
    assert schema["properties"]["zkey"] == {
        "type": "object", "description": "the settings of zlauncher: written by make docs from the launchers' Settings",
        "additionalProperties": False, "properties": {
        "queue": {"type": "string"}, "account": {"type": ["string", "null"]},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535}, "exclusive": {"type": "boolean"},
        "grace_s": {"type": "number"}, "release": {"type": ["string", "null"], "description": "null: 1.0"}}}
    # Written last, after the others' keys, which stay as they were.
    assert list(schema["properties"])[-3:] == [*launchers.settings_keys()][-3:] and list(schema["properties"])[-1] == "zkey"
    assert {k: v for k, v in schema["properties"].items() if k != "zkey"} == results.schema(results.JOB)["properties"]
    # Its defaults are its Settings', and a null that stands for one is resolved to it.
    assert launchers.settings_defaults()["zkey"] == dataclasses.asdict(_OwnSettings.Settings())
    assert launchers.null_as_default("zkey", {"release": None, "account": None}) == {"release": "1.0", "account": None}


def test_make_docs_drops_the_settings_key_of_a_launcher_gone_and_refuses_one_written_by_hand_among_them():
    generator = _generator()
    text = generator._schema_file(results.JOB).read_text()
    slurm_only = {"slurm": generator.settings_schemas()["slurm"]}
    assert list(json.loads(generator.settings_text(slurm_only, text))["properties"])[-2:] == ["dataset", "slurm"]
    by_hand = text.replace('"slurm": {', '"zhand": {').replace(f"srun, torchrun: {generator.GENERATED}", "by hand")
    with pytest.raises(SystemExit, match="zhand sit among the launchers' settings keys, which make docs writes"):
        generator.settings_text(generator.settings_schemas(), by_hand)


def test_a_settings_type_no_job_document_holds_is_refused_by_name(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Listed:
        hosts: tuple[str, ...] = ()

    monkeypatch.setattr(_OwnSettings, "Settings", Listed)
    monkeypatch.setitem(launchers.registry(), "zlauncher", _OwnSettings())
    with pytest.raises(ValueError, match=r"settings key zkey: hosts is annotated tuple\[str, \.\.\.\], which a job "
                                         r"document cannot hold \(one of str, int, float, bool, NoneType"):
        launchers.settings_schema("zkey")


def test_launchers_sharing_a_settings_key_that_declare_it_differently_are_refused(monkeypatch):
    # Both read slurm; torchrun's Settings extend srun's with its own rendezvous port, which is no key of the job.
    assert [setting.name for setting in launchers.key_fields("slurm")] == ["partition", "mpi"]
    assert "rdzv_port" in {f.name for f in dataclasses.fields(launchers.get("torchrun").Settings)}

    @dataclasses.dataclass(frozen=True)
    class OtherMpi(launchers.get("srun").Settings):
        mpi: str = "pmi2"

    monkeypatch.setattr(type(launchers.get("torchrun")), "Settings", OtherMpi)
    with pytest.raises(ValueError) as refused:
        launchers.settings_defaults()
    assert str(refused.value) == (
        "the launchers reading settings key slurm (srun, torchrun) must declare its settings alike, but differ on "
        "mpi: srun: <class 'str'> = 'pmix' {'schema': {'description': 'srun --mpi plugin'}}; torchrun: <class 'str'> = "
        "'pmi2'")


def test_the_roles_launcher_facts_are_the_registrys():
    """What the role asks of a launcher instead of its name, as `make docs` wrote it, read back against each class."""
    facts = yaml.safe_load(ROLE_VARS.read_text())["_benchrunner_launchers"]
    assert sorted(facts) == list(launchers.names())
    for name, fact in facts.items():
        launcher = launchers.get(name)
        assert (fact["submits"], fact["uses_hosts"], fact["settings_key"]) == (
            launcher.submits, launcher.uses_hosts, launcher.settings_key), name
        assert (fact["stacks"], fact["default_for"], fact["frameworks"], fact["containers"]) == (
            list(launcher.stacks), list(launcher.default_for), list(launcher.frameworks), list(launcher.containers)), name
        assert fact["needs"] == {stack: sorted(launcher.on_stack(stack).needs) for stack in launcher.stacks}, name


def compared_names(text: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """Each line of `text` (by number, comments aside) that compares something with a launcher's quoted name: ==, !=,
    in (a name or a list of them), case, in Python or Jinja."""
    alternatives = "|".join(map(re.escape, names))
    quoted = rf"""(?:'(?:{alternatives})'|"(?:{alternatives})")"""
    compared = re.compile(rf"(?:==|!=|\bcase)\s*{quoted}|\bin\s*[(\[{{][^)\]}}]*{quoted}|{quoted}\s*(?:==|!=|\bin\b)")
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if not line.lstrip().startswith("#") and compared.search(line)]


def name_scanned_files() -> list[Path]:
    """The package outside its launchers, and the benchmark role: what asks a launcher, never its name."""
    return [path for root in (PACKAGE, ROLE) for path in sorted(root.rglob("*"))
            if path.suffix in (".py", ".yml", ".j2") and LAUNCHERS not in path.parents]


def test_nothing_outside_the_launchers_compares_a_launchers_name():
    files = name_scanned_files()
    assert {PACKAGE / "cli.py", PACKAGE / "campaign.py", PACKAGE / "job_document.py", ROLE_VARS,
            ROLE / "defaults" / "main.yml", ROLE / "tasks" / "00-preflight.yml"} <= set(files)
    assert not any(LAUNCHERS in path.parents for path in files)
    found = [f"{path.relative_to(PROJECT)}:{number}: {line}" for path in files
             for number, line in compared_names(path.read_text(), launchers.names())]
    assert found == [], "ask the launcher's class (or the role's _benchrunner_launchers) what it is, not its name"


def test_the_name_scan_finds_each_way_a_name_was_compared(tmp_path):
    names = launchers.names()
    # How the role and the package compared names before the launchers declared what was asked.
    planted = [
        "      not (_benchrunner_launcher_asked == 'srun' or (_benchrunner_launcher_asked == 'torchrun'))",
        "  {{ dict(groups[cluster_nodes_group]) if _benchrunner_launcher_asked == 'mpijob' else {} }}",
        '    if job.launcher != "horovodrun":',
        '    if point["launcher"] in ("tcp", "mpirun"):',
        '    if "srun" in asked:',
        '        case "mpijob":',
    ]
    role_vars = tmp_path / "main.yml"
    role_vars.write_text(ROLE_VARS.read_text() + "\n".join(planted) + "\n# _benchrunner_launcher_asked == 'srun'\n")
    start = len(ROLE_VARS.read_text().splitlines()) + 1
    assert compared_names(role_vars.read_text(), names) == [
        (start + offset, line.strip()) for offset, line in enumerate(planted)]
    # A name that is no comparison's is not one: a launcher's facts by name, a file named after it.
    assert compared_names("  mpijob:\n    '--manifest-out', dir ~ '/mpijob.yaml'\n", names) == []


def test_make_docs_writes_a_new_container_runtime_into_the_roles_choices_and_its_launchers(monkeypatch):
    monkeypatch.setattr(containers, "names", lambda: ("charliecloud", "zruntime"))
    monkeypatch.setattr(type(launchers.get("srun")), "containers", ("charliecloud", "zruntime"))
    generator = _generator()
    texts = generator.rendered()
    options = yaml.safe_load(texts[ROLE_SPECS])["argument_specs"]["main"]["options"]
    assert options["benchrunner_container"]["choices"] == ["none", "charliecloud", "zruntime"]
    facts = yaml.safe_load(texts[ROLE_VARS])[generator.LAUNCHER_FACTS]
    mapping = {name: fact["containers"] for name, fact in facts.items()}
    assert mapping["srun"] == ["charliecloud", "zruntime"]
    assert {name: runtimes for name, runtimes in mapping.items() if name != "srun"} == {
        name: list(launchers.get(name).containers) for name in launchers.names() if name != "srun"}
    # Only srun's facts changed in the vars.
    before, after = ROLE_VARS.read_text().splitlines(), texts[ROLE_VARS].splitlines()
    assert len(before) == len(after) and sum(old != new for old, new in zip(before, after)) == 1


def test_every_framework_setting_is_recorded_by_the_rank_result_schema():
    workload = results.schema(results.RANK_RESULT)["$defs"]["workload"]["properties"]
    for name in frameworks.names():
        assert set(frameworks.setting_names(name)) <= set(workload), name


def test_every_launcher_declares_its_contract():
    for name in launchers.names():
        launcher = launchers.get(name)
        assert isinstance(launcher, launchers.Launcher) and launcher.name == name
        assert set(launcher.stacks) <= set(launchers.STACKS), name
        assert set(launcher.frameworks) <= set(frameworks.names()) and launcher.frameworks, name
        assert set(launcher.containers) <= set(containers.names()), name
        assert all(isinstance(getattr(launcher, flag), bool) for flag in ("uses_hosts", "beats", "runs_in_pods",
                                                                           "submits")), name
        # Declared once or per stack (for each of its stacks, no other).
        for attribute in ("needs", "leaves", "watched_in_job"):
            value = getattr(launcher, attribute)
            assert not isinstance(value, dict) or set(value) == set(launcher.stacks), (name, attribute)
        for stack in launcher.stacks:
            contract = launcher.on_stack(stack)
            assert contract.needs <= {"hosts", "slurm", "kubeconfig"}, (name, stack)
            assert isinstance(contract.leaves, tuple), (name, stack)
            # Watched inside its job only where its ranks beat.
            assert contract.watched_in_job in (False, launcher.beats), (name, stack)
        # Started from a node, or submitted from the control host: one of the two is its own.
        own = {method for method in ("start", "submit") if getattr(type(launcher), method) is not getattr(
            launchers.Launcher, method)}
        assert own == ({"submit"} if launcher.submits else {"start"}), name
        # Its settings are a frozen dataclass whose every field has a default, read from the key it names.
        fields = dataclasses.fields(launcher.Settings)
        assert launcher.Settings.__dataclass_params__.frozen, name
        assert all(f.default is not dataclasses.MISSING for f in fields), name
        assert (launcher.settings_key is None) == (not fields), name
        assert launcher.settings_key is None or launcher.settings_key in DEFAULTS, name
    # Each stack has exactly one default launcher, and it runs there.
    for stack in launchers.STACKS:
        owners = [n for n in launchers.names() if stack in launchers.get(n).default_for]
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
            value = value[DERIVED.get(key, key)]  # a key benchrunner has a default for
    # The request leaves out exactly these when unset.
    assert set(re.findall(r"(benchrunner_\w+) \| default\(none\)", request)) == set(LEFT_TO_BENCHRUNNER)
    # No other role default is named like one of the job's.
    named_like = {"benchrunner_" + name for name in _leaf_names(jobs) | {"node_results_dir"}}
    assert sorted(set(role_defaults) & named_like - CLUSTER_VALUES) == []
    # The schema holds none, and what reads a default reads benchrunner's.
    assert _schema_defaults(results.schema(results.JOB)) == []
    # A launcher's Settings default to the job's defaults of its key, field for field.
    for name in launchers.names():
        launcher = launchers.get(name)
        if launcher.settings_key:
            defaults = dataclasses.asdict(launcher.Settings())
            assert {k: defaults[k] for k in DEFAULTS[launcher.settings_key]} == DEFAULTS[launcher.settings_key], name
    launch = cli.build_parser().parse_args(["launch", "--run-id", "r", "--ranks", "1"])
    assert (launch.timeout, launch.results_dir) == (DEFAULTS["timeout_s"], DEFAULTS["nodes"]["results_dir"])
    # A launcher's options left out stay out of the job (which refuses another launcher's settings), so its Settings
    # take the job's defaults, as above.
    assert (launch.partition, launch.slurm_mpi, launch.image, launch.shm_size) == (None, None, None, None)
