#!/usr/bin/env python3
"""Writes each role's README.md from its meta/argument_specs.yml (`make docs`), so the two never disagree."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[1] / "roles"


def cell(value: object) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()
    return "`" + text.replace("|", "\\|") + "`" if text else "`''`"


def render(role: Path) -> str:
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    main = specs["main"]
    lines = [f"# {role.name}", "", main["short_description"], ""]
    for paragraph in main.get("description", []):
        lines += [paragraph, ""]
    options = main.get("options", {})
    if options:
        lines += ["| variable | type | default | description |", "|---|---|---|---|"]
        for name, spec in options.items():
            kind = spec.get("type", "str") + (f" of {spec['elements']}" if "elements" in spec else "")
            choices = f" One of: {', '.join(map(str, spec['choices']))}." if "choices" in spec else ""
            default = cell(spec["default"]) if "default" in spec else "unset"
            lines.append(f"| `{name}` | {kind} | {default} | {spec['description']}{choices} |")
        lines.append("")
    for entry, spec in specs.items():
        if entry != "main":
            lines += [f"Entry point `{entry}`: {spec['short_description']}", ""]
    return "\n".join(lines)


def main(check: bool) -> int:
    stale = []
    for role in sorted(p for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").is_file()):
        text = render(role)
        readme = role / "README.md"
        if readme.is_file() and readme.read_text() == text:
            continue
        stale.append(role.name)
        if not check:
            readme.write_text(text)
    if check and stale:
        print(f"stale role READMEs (run `make docs`): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(check="--check" in sys.argv))
