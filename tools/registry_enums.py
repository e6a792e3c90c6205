#!/usr/bin/env python3
"""Writes the launcher, framework and container runtime registries into what names them (`make docs`, before the
role READMEs): the enums of the current schemas, the benchrunner role's argument-spec choices, and the launchers' facts
the role asks instead of their names, so none is kept by hand.

Each is one list in a hand-formatted file: only that list's text is replaced, and the file is read back to show the
replacement landed where it was meant to.
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
