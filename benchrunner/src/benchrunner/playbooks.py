"""Driving the project's playbooks through ansible-runner's Python API: events and stats, not stdout."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

SITE = "site.yml"
# The benchmark play alone: each run of a campaign on a provisioned cluster.
BENCHMARK_PLAYBOOK = "playbooks/benchmark.yml"
# Tags of site.yml's plays: provisioning and the benchmark are run separately.
BENCHMARK_TAG = "benchmark"


@dataclass(frozen=True)
class Change:
    play: str
    task: str
    host: str


@dataclass
class Outcome:
    rc: int
    status: str
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.status == "successful"


def find_project(start: Path | None = None) -> Path:
    """The project root: $HPCML_PROJECT_DIR, or the nearest folder upwards holding site.yml."""
    if os.environ.get("HPCML_PROJECT_DIR"):
        return Path(os.environ["HPCML_PROJECT_DIR"]).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / SITE).is_file() and (candidate / "ansible.cfg").is_file():
            return candidate
    raise FileNotFoundError(f"no {SITE} with ansible.cfg above {here}; run from the project or set HPCML_PROJECT_DIR")


def failure_message(result: dict[str, Any]) -> str:
    """What went wrong, from a task result; for loops, from the items that failed."""
    items = [item for item in result.get("results", []) if isinstance(item, dict) and item.get("failed")]
    if items:
        return "; ".join(failure_message(item) for item in items)
    message = str(result.get("msg") or result.get("reason") or "failed")
    detail = _last_words(result)
    return f"{message}: {detail}" if detail and detail not in message else message


def _last_words(result: dict[str, Any]) -> str:
    """A failed command's own explanation: benchrunner's error line, else the last line of its stderr."""
    stderr = str(result.get("stderr") or "")
    text = stderr + "\n" + str(result.get("stdout") or "")
    own = [line for line in text.splitlines() if line.startswith("benchrunner: ")]
    if own:
        return own[-1].removeprefix("benchrunner: ")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Progress:
    """Prints one line per play and task and every failure, from ansible-runner's event stream."""

    def __init__(self, out: TextIO | None = sys.stderr) -> None:
        self.out = out
        self.failures: list[str] = []
        self.changes: list[Change] = []
        # Results of no_log tasks reach the event stream without their "changed"; the recap's count says.
        self._hidden: dict[str, list[Change]] = {}

    def _say(self, line: str) -> None:
        if self.out is not None:
            print(line, file=self.out, flush=True)

    def _account_for_hidden(self, changed: dict[str, int]) -> None:
        """Changes the recap counts beyond those seen are no_log tasks': named when all of a host's changed."""
        for host, hidden in self._hidden.items():
            unseen = changed.get(host, 0) - sum(c.host == host for c in self.changes)
            if unseen <= 0:
                continue
            if unseen >= len(hidden):
                self.changes += hidden
            else:
                tasks = ", ".join(sorted({c.task for c in hidden}))
                self.changes.append(Change("", f"{unseen} of the no_log tasks {tasks}", host))

    def __call__(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        if kind == "playbook_on_play_start":
            self._say(f"== {data.get('play', '').strip()}")
        elif kind == "playbook_on_task_start":
            self._say(f"   - {data.get('task', '').strip()}")
        elif kind == "runner_on_ok" and "censored" in data.get("res", {}):
            self._hidden.setdefault(data.get("host", ""), []).append(
                Change(data.get("play", ""), data.get("task", ""), data.get("host", "")))
        elif kind == "runner_on_ok" and data.get("res", {}).get("changed"):
            self.changes.append(Change(data.get("play", ""), data.get("task", ""), data.get("host", "")))
        elif kind == "playbook_on_stats":
            self._account_for_hidden(data.get("changed", {}))
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            message = failure_message(data.get("res", {}))
            line = f"{data.get('host')}: {data.get('task', '').strip()}: {message}"
            self.failures.append(line)
            self._say(f"     FAILED {line}")
        # Keep the event in the artifacts folder as well.
        return True


def _envvars(project: Path) -> dict[str, str]:
    # Runner otherwise points ANSIBLE_ROLES_PATH elsewhere: keep the project's ansible.cfg in charge,
    # and the Ansible installed beside this Python.
    return {"ANSIBLE_CONFIG": str(project / "ansible.cfg"),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def run(project: Path, *, playbook: str = SITE, inventory: str | None = None, extravars: dict[str, Any] | None = None,
        tags: str | None = None, skip_tags: str | None = None, limit: str | None = None, check: bool = False,
        progress: Progress | None = None, fact_cache: Path | None = None, runner_module: Any = None) -> Outcome:
    """Run a playbook; with fact_cache, hosts' facts are kept in that folder and gathered only where it has none."""
    if runner_module is None:
        import ansible_runner as runner_module  # noqa: PLC0415 - control-host extra
    handler = progress or Progress()
    artifacts = project / ".cache" / "runner"
    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benchrunner-", dir=artifacts) as private:
        kwargs: dict[str, Any] = {
            "private_data_dir": private,
            "project_dir": str(project),
            "playbook": playbook,
            "extravars": extravars or {},
            "event_handler": handler,
            "quiet": True,
            "envvars": _envvars(project),
        }
        if fact_cache is not None:
            # Runner keeps facts in a jsonfile cache of its own (under the artifacts, gone with them): this folder
            # instead, and facts gathered only for hosts it has none of.
            kwargs["fact_cache"] = str(fact_cache.resolve())
            kwargs["envvars"]["ANSIBLE_GATHERING"] = "smart"
        if inventory:
            kwargs["inventory"] = str(Path(inventory).resolve())
        if tags:
            kwargs["tags"] = tags
        if skip_tags:
            kwargs["skip_tags"] = skip_tags
        if limit:
            kwargs["limit"] = limit
        if check:
            kwargs["cmdline"] = "--check --diff"
        result = runner_module.run(**kwargs)
        stats = result.stats or {}
    return Outcome(rc=result.rc, status=result.status, stats=stats, failures=handler.failures, changes=handler.changes)


def reachable(project: Path, *, inventory: str | None = None, pattern: str = "nodes",
              runner_module: Any = None) -> list[str]:
    """The hosts of `pattern` that answer Ansible's ping now."""
    if runner_module is None:
        import ansible_runner as runner_module  # noqa: PLC0415 - control-host extra
    artifacts = project / ".cache" / "runner"
    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benchrunner-ping-", dir=artifacts) as private:
        kwargs: dict[str, Any] = {"private_data_dir": private, "project_dir": str(project), "host_pattern": pattern,
                                  "module": "ansible.builtin.ping", "quiet": True, "envvars": _envvars(project)}
        if inventory:
            kwargs["inventory"] = str(Path(inventory).resolve())
        result = runner_module.run(**kwargs)
        stats = result.stats or {}
    return sorted(set(stats.get("ok", {})) - set(stats.get("dark", {})) - set(stats.get("failures", {})))


def print_recap(outcome: Outcome, out: TextIO | None = None) -> None:
    out = out or sys.stderr
    hosts = sorted({h for counts in outcome.stats.values() if isinstance(counts, dict) for h in counts})
    print(f"{'host':<24} {'ok':>5} {'changed':>8} {'failed':>7} {'unreachable':>12}", file=out)
    for host in hosts:
        def get(key: str, host: str = host) -> int:
            return outcome.stats.get(key, {}).get(host, 0)
        print(f"{host:<24} {get('ok'):>5} {get('changed'):>8} {get('failures'):>7} {get('dark'):>12}", file=out)
    print(f"status: {outcome.status} (rc {outcome.rc})", file=out)
