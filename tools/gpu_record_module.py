#!/usr/bin/env python3
"""Runs one of the collection's facts modules on a machine without ansible-core (make gpu-record on a bare GPU box).

The module's own code runs unchanged; only ansible.module_utils.basic.AnsibleModule is stood in for, with what these
modules use of it: their parameters with defaults, get_bin_path, run_command, exit_json and fail_json.
Usage: gpu_record_module.py MODULE_FILE [ARGS_JSON]. Prints the module's result as JSON, as ansible-core's runner does.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import ClassVar

COLLECTIONS = Path(__file__).resolve().parents[1] / "collections"
# ansible-core's get_bin_path looks in the sbin folders too, where root's tools live.
SBIN = ("/sbin", "/usr/sbin", "/usr/local/sbin")


class AnsibleModule:
    """The part of ansible-core's AnsibleModule the facts modules call."""

    # The module's arguments, as ansible-core would pass them (set before the module runs).
    args: ClassVar[dict] = {}

    def __init__(self, argument_spec: dict, supports_check_mode: bool = False, **_ignored) -> None:
        unknown = sorted(set(self.args) - set(argument_spec))
        if unknown:
            self.fail_json(msg=f"Unsupported parameters: {', '.join(unknown)}")
        self.params = {}
        for name, spec in argument_spec.items():
            value = self.args.get(name, spec.get("default"))
            if value is not None and spec.get("type") == "path":
                value = os.path.expanduser(os.path.expandvars(value))
            self.params[name] = value
        self.check_mode = False

    def get_bin_path(self, name: str, required: bool = False, opt_dirs: list | None = None) -> str | None:
        folders = [*(opt_dirs or []), *os.environ.get("PATH", os.defpath).split(os.pathsep), *SBIN]
        path = shutil.which(name, path=os.pathsep.join(folders))
        if path is None and required:
            self.fail_json(msg=f"Failed to find required executable {name!r} in paths: {os.pathsep.join(folders)}")
        return path

    def run_command(self, args, check_rc: bool = False, **_ignored) -> tuple[int, str, str]:
        # As ansible-core: C locale for parseable output, and a command that cannot start is an rc, not a crash.
        env = dict(os.environ, LANG="C", LC_ALL="C", LC_MESSAGES="C")
        try:
            done = subprocess.run(args, capture_output=True, text=True, errors="replace", env=env, check=False)
        except OSError as error:
            return error.errno or 2, "", str(error)
        if check_rc and done.returncode != 0:
            self.fail_json(msg=done.stderr or done.stdout, rc=done.returncode, cmd=args)
        return done.returncode, done.stdout, done.stderr

    def exit_json(self, **result) -> None:
        result.setdefault("changed", False)
        print(json.dumps(result))
        sys.exit(0)

    def fail_json(self, msg: str, **result) -> None:
        print(json.dumps({**result, "failed": True, "msg": msg}))
        sys.exit(1)


def install_stand_in() -> None:
    """Makes `from ansible.module_utils.basic import AnsibleModule` give the stand-in."""
    for name in ("ansible", "ansible.module_utils"):
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
    basic = types.ModuleType("ansible.module_utils.basic")
    basic.AnsibleModule = AnsibleModule
    sys.modules["ansible.module_utils.basic"] = basic
    sys.modules["ansible.module_utils"].basic = basic
    sys.path.insert(0, str(COLLECTIONS))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    AnsibleModule.args = json.loads(argv[1]) if len(argv) == 2 else {}
    install_stand_in()
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
