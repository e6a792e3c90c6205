#!/usr/bin/env python3
"""Writes the launcher, framework and container runtime registries into what names them (`make docs`, before the
role READMEs): the enums of the current schemas, the job schema's launcher settings keys (from each launcher's
Settings), the benchrunner role's argument-spec choices, and the launchers' facts the role asks instead of their
names, so none is kept by hand.

Each is one list (or one run of properties) in a hand-formatted file: only that text is replaced, and the file is read
back to show the replacement landed where it was meant to.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
# The registries of this checkout, whichever benchrunner the environment has installed.
sys.path.insert(0, str(PROJECT / "benchrunner" / "src"))

from benchrunner import containers, frameworks, launchers, results  # noqa: E402

SCHEMAS = PROJECT / "benchrunner" / "src" / "benchrunner" / "schemas"
ROLE_SPECS = PROJECT / "roles" / "benchrunner" / "meta" / "argument_specs.yml"
ROLE_VARS = PROJECT / "roles" / "benchrunner" / "vars" / "main.yml"
# How the job schema's description of a launcher settings key ends: written here, from the launchers' Settings.
GENERATED = "written by make docs from the launchers' Settings"
# The role's variable holding each launcher's facts, the last block of its vars.
LAUNCHER_FACTS = "_benchrunner_launchers"


def _schema_file(kind: str) -> Path:
    return SCHEMAS / f"{kind}.v{results.version_of(kind)}.json"


# (current schema, path to the node whose enum lists the registry, what it lists). Older schema versions are the
# records of their time and stay as they were.
SCHEMA_ENUMS: tuple[tuple[str, tuple[str, ...], Callable[[], tuple[str, ...]]], ...] = (
    (results.CAMPAIGN, ("$defs", "launcher"), launchers.names),
    (results.CAMPAIGN, ("$defs", "framework"), frameworks.names),
    (results.RANK_RESULT, ("$defs", "framework"), frameworks.names),
    (results.ALLREDUCE_RESULT, ("properties", "framework"), frameworks.names),
    (results.JOB, ("$defs", "runtime"), containers.names),
    (results.RANK_RESULT, ("$defs", "runtime"), containers.choices),
)
# The benchrunner role's options whose choices list a registry.
ROLE_CHOICES: tuple[tuple[str, Callable[[], tuple[str, ...]]], ...] = (
    ("benchrunner_launcher", launchers.names),
    ("benchrunner_framework", frameworks.names),
    ("benchrunner_container", lambda: ("none", *containers.names())),
)


def _replace_once(text: str, pattern: str, replacement: str, where: str) -> str:
    found = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(found) != 1:
        raise SystemExit(f"{where}: expected one match of {pattern!r}, found {len(found)}: write the list as "
                         "the generator finds it, or teach it the new shape")
    match = found[0]
    return text[:match.start(1)] + replacement + text[match.end(1):]


def _at(document: object, path: tuple[str, ...]) -> object:
    for key in path:
        document = document[key]  # type: ignore[index]
    return document


def schema_text(kind: str, path: tuple[str, ...], names: tuple[str, ...], text: str) -> str:
    """The schema's text with the enum at `path` listing `names`."""
    where = f"{_schema_file(kind).name} {'/'.join(path)}"
    new = _replace_once(text, rf'"{re.escape(path[-1])}": \{{"enum": (\[[^\]]*\])', json.dumps(list(names)), where)
    if _at(json.loads(new), path)["enum"] != list(names):
        raise SystemExit(f"{where}: the enum replaced is not the one at that path")
    return new


def _settings_block(key: str, schema: dict[str, object]) -> str:
    """One settings key's property as the job schema writes it: one line a keyword, one a setting."""
    properties = schema["properties"]
    assert isinstance(properties, dict)
    lines = [f"      {json.dumps(keyword)}: {json.dumps(value)}" for keyword, value in schema.items() if keyword != "properties"]
    settings = ",\n".join(f"        {json.dumps(name)}: {json.dumps(value)}" for name, value in properties.items())
    lines.append(f'      "properties": {{\n{settings}\n      }}')
    return f"    {json.dumps(key)}: {{\n" + ",\n".join(lines) + "\n    }"


def settings_text(schemas: dict[str, dict[str, object]], text: str) -> str:
    """The job schema's text with its launchers' settings keys, the last of its properties, being `schemas` (by key):
    from the first of them, or of the keys written before (their description says so), to the end of its properties.
    A key written before that no launcher reads now is dropped; a key written by hand among them is refused."""
    where = f"{_schema_file(results.JOB).name} properties"
    before = json.loads(text)["properties"]
    written = [key for key, value in before.items() if str(value.get("description", "")).endswith(GENERATED)]
    keys = "|".join(map(re.escape, [*written, *schemas]))
    pattern = rf'^(    "(?:{keys})": \{{\n(?:.*\n)*?)  \}},\n  "\$defs"'
    found = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(found) != 1:
        raise SystemExit(f"{where}: expected the launchers' settings keys as the last properties, found {len(found)} "
                         "runs of them: write them as the generator finds them, or teach it the new shape")
    held = json.loads("{" + found[0].group(1) + "}")
    strangers = sorted(set(held) - set(written) - set(schemas))
    if strangers:
        raise SystemExit(f"{where}: {', '.join(strangers)} sit among the launchers' settings keys, which make docs "
                         "writes: move them before those")
    new = text[:found[0].start(1)] + ",\n".join(_settings_block(k, s) for k, s in schemas.items()) + "\n" \
        + text[found[0].end(1):]
    after = json.loads(new)["properties"]
    if list(after)[-len(schemas):] != list(schemas) or any(after[key] != schema for key, schema in schemas.items()) \
            or {k: v for k, v in after.items() if k not in schemas} != {k: v for k, v in before.items() if k not in held}:
        raise SystemExit(f"{where}: the properties replaced are not the launchers' settings keys")
    return new


def settings_schemas() -> dict[str, dict[str, object]]:
    """Each launcher settings key's property of the job schema, saying whose it is and that make docs writes it."""
    return {key: {"type": "object", "description": f"the settings of {', '.join(readers)}: {GENERATED}",
                  **launchers.settings_schema(key)} for key, readers in launchers.settings_keys().items()}


def specs_text(option: str, names: tuple[str, ...], text: str) -> str:
    """The role's argument specs with `option`'s choices listing `names`."""
    # The option's own block: its key line, then lines indented deeper, up to its choices.
    pattern = rf"^( +){re.escape(option)}:\n(?:\1 +.*\n)*?\1 +choices: (\[.*\])$"
    found = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(found) != 1:
        raise SystemExit(f"{ROLE_SPECS.name}: expected one choices list of {option}, found {len(found)}")
    match = found[0]
    new = text[:match.start(2)] + f"[{', '.join(names)}]" + text[match.end(2):]
    if yaml.safe_load(new)["argument_specs"]["main"]["options"][option]["choices"] != list(names):
        raise SystemExit(f"{ROLE_SPECS.name}: the choices replaced are not {option}'s")
    return new


def launcher_facts() -> dict[str, dict[str, object]]:
    """What the benchrunner role asks of a launcher, by its name: whether it submits from the control host, its
    stacks (and those it is the default of), what it needs on each, whether hosts given place its ranks, the job key
    of its settings, the frameworks it starts and the container runtimes it can start ranks in."""
    return {name: {"submits": launcher.submits, "stacks": list(launcher.stacks), "default_for": list(launcher.default_for),
                   "needs": {stack: sorted(launcher.on_stack(stack).needs) for stack in launcher.stacks},
                   "uses_hosts": launcher.uses_hosts, "settings_key": launcher.settings_key,
                   "frameworks": list(launcher.frameworks), "containers": list(launcher.containers)}
            for name, launcher in sorted(launchers.registry().items())}


def vars_text(facts: dict[str, dict[str, object]], text: str) -> str:
    """The role's vars with its launchers' facts block (the variable and the lines indented below it) being `facts`."""
    block = yaml.safe_dump({LAUNCHER_FACTS: facts}, default_flow_style=None, sort_keys=False, width=118)
    new = _replace_once(text, rf"^({re.escape(LAUNCHER_FACTS)}:\n(?: .*\n)*)", block, ROLE_VARS.name)
    if yaml.safe_load(new)[LAUNCHER_FACTS] != facts:
        raise SystemExit(f"{ROLE_VARS.name}: the block replaced is not {LAUNCHER_FACTS}")
    return new


def rendered() -> dict[Path, str]:
    """Every generated file as it should read, by path."""
    texts: dict[Path, str] = {}
    for kind, path, names in SCHEMA_ENUMS:
        file = _schema_file(kind)
        texts[file] = schema_text(kind, path, names(), texts.get(file, file.read_text()))
    job = _schema_file(results.JOB)
    texts[job] = settings_text(settings_schemas(), texts.get(job, job.read_text()))
    specs = ROLE_SPECS.read_text()
    for option, names in ROLE_CHOICES:
        specs = specs_text(option, names(), specs)
    texts[ROLE_SPECS] = specs
    texts[ROLE_VARS] = vars_text(launcher_facts(), ROLE_VARS.read_text())
    return texts


def main(check: bool) -> int:
    stale = {path: text for path, text in rendered().items() if path.read_text() != text}
    if check and stale:
        print(f"registry lists not current (run `make docs`): {', '.join(str(p.relative_to(PROJECT)) for p in stale)}",
              file=sys.stderr)
        return 1
    for path, text in stale.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(check="--check" in sys.argv))
