"""The launcher and framework registries are the one list: the schemas' enums and the role's choices follow them."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchrunner import frameworks, launchers, results

ROLE_SPECS = Path(__file__).resolve().parents[2] / "roles" / "benchrunner" / "meta" / "argument_specs.yml"


def role_options() -> dict:
    return yaml.safe_load(ROLE_SPECS.read_text())["argument_specs"]["main"]["options"]


def test_the_schemas_name_exactly_the_registered_launchers_and_frameworks():
    defs = results.schema(results.CAMPAIGN)["$defs"]
    assert sorted(defs["launcher"]["enum"]) == sorted(launchers.names())
    assert sorted(defs["framework"]["enum"]) == sorted(frameworks.names())
    rank = results.schema(results.RANK_RESULT)
    assert sorted(rank["properties"]["framework"]["enum"]) == sorted(frameworks.names())
    assert sorted(rank["$defs"]["workload"]["properties"]["framework"]["enum"]) == sorted(frameworks.names())
    assert sorted(results.schema(results.ALLREDUCE_RESULT)["properties"]["framework"]["enum"]) == sorted(
        frameworks.names())


def test_the_role_offers_exactly_the_registered_launchers_and_frameworks():
    options = role_options()
    assert sorted(options["benchrunner_launcher"]["choices"]) == sorted(launchers.names())
    assert sorted(options["benchrunner_framework"]["choices"]) == sorted(frameworks.names())
    assert options["benchrunner_framework"]["default"] == frameworks.DEFAULT


def test_every_framework_setting_is_recorded_by_the_rank_result_schema():
    workload = results.schema(results.RANK_RESULT)["$defs"]["workload"]["properties"]
    for name in frameworks.names():
        assert set(frameworks.setting_names(name)) <= set(workload), name


def test_every_launcher_declares_its_contract():
    for name in launchers.names():
        module = launchers.get(name)
        assert set(module.STACKS) <= {"baremetal", "slurm", "k8s"}, name
        assert set(module.FRAMEWORKS) <= set(frameworks.names()) and module.FRAMEWORKS, name
        assert module.NEEDS <= {"hosts", "slurm", "kubeconfig"}, name
        assert isinstance(module.USES_HOSTS, bool) and isinstance(module.LEAVES, tuple), name
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


def test_no_two_frameworks_share_a_setting_name():
    seen: dict[str, str] = {}
    for name in frameworks.names():
        for setting in frameworks.setting_names(name):
            assert setting not in seen, f"{setting} of {name} is also {seen[setting]}'s"
            seen[setting] = name
