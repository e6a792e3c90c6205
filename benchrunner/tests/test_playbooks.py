from pathlib import Path
from types import SimpleNamespace

import pytest

from benchrunner import playbooks


class FakeRunner:
    """Stands in for ansible_runner: replays events to the handler, records the call."""

    def __init__(self, events, rc=0, status="successful", stats=None):
        self.events, self.rc, self.status, self.stats = events, rc, status, stats or {}
        self.kwargs = None

    def run(self, **kwargs):
        self.kwargs = kwargs
        for event in self.events:
            kwargs["event_handler"](event)
        return SimpleNamespace(rc=self.rc, status=self.status, stats=self.stats)


def project(tmp_path):
    (tmp_path / "site.yml").write_text("---\n")
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    return tmp_path


def test_run_passes_the_project_and_options(tmp_path):
    runner = FakeRunner([])
    outcome = playbooks.run(project(tmp_path), inventory="inv", extravars={"stack": "baremetal"}, tags="benchmark",
                            progress=playbooks.Progress(out=None), runner_module=runner)
    assert outcome.ok
    assert runner.kwargs["project_dir"] == str(tmp_path)
    assert runner.kwargs["playbook"] == "site.yml"
    assert runner.kwargs["inventory"] == str(Path("inv").resolve())
    assert runner.kwargs["extravars"] == {"stack": "baremetal"}
    assert runner.kwargs["tags"] == "benchmark"
    assert runner.kwargs["envvars"]["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert "skip_tags" not in runner.kwargs
    assert "cmdline" not in runner.kwargs
    assert "fact_cache" not in runner.kwargs and "ANSIBLE_GATHERING" not in runner.kwargs["envvars"]


def test_a_fact_cache_keeps_facts_in_its_folder_and_gathers_only_what_it_lacks(tmp_path):
    runner = FakeRunner([])
    playbooks.run(project(tmp_path), fact_cache=Path("facts"), progress=playbooks.Progress(out=None),
                  runner_module=runner)
    # Runner joins the name to its artifacts folder: an absolute path is the folder itself.
    assert runner.kwargs["fact_cache"] == str(Path("facts").resolve())
    assert runner.kwargs["envvars"]["ANSIBLE_GATHERING"] == "smart"


def test_check_mode_asks_for_check_and_diff(tmp_path):
    runner = FakeRunner([])
    playbooks.run(project(tmp_path), check=True, progress=playbooks.Progress(out=None), runner_module=runner)
    assert runner.kwargs["cmdline"] == "--check --diff"


def test_events_become_changes_and_failures(tmp_path):
    events = [
        {"event": "playbook_on_play_start", "event_data": {"play": "Node layer"}},
        {"event": "runner_on_ok", "event_data": {"play": "Node layer", "task": "Install", "host": "n1",
                                                 "res": {"changed": True}}},
        {"event": "runner_on_ok", "event_data": {"play": "Node layer", "task": "Check", "host": "n1",
                                                 "res": {"changed": False}}},
        {"event": "runner_on_failed", "event_data": {"task": "Loop", "host": "n2", "res": {
            "msg": "One or more items failed", "results": [{"failed": True, "msg": "no group 'nodes'"},
                                                           {"failed": False, "msg": "fine"}]}}},
        {"event": "runner_on_failed", "event_data": {"task": "Ignored", "host": "n2", "ignore_errors": True,
                                                     "res": {"msg": "x"}}},
        {"event": "runner_on_unreachable", "event_data": {"task": "Gather", "host": "n3", "res": {"msg": "timeout"}}},
    ]
    outcome = playbooks.run(project(tmp_path), progress=playbooks.Progress(out=None),
                            runner_module=FakeRunner(events, rc=2, status="failed"))
    assert not outcome.ok
    assert outcome.changes == [playbooks.Change("Node layer", "Install", "n1")]
    assert outcome.failures == ["n2: Loop: no group 'nodes'", "n3: Gather: timeout"]


def test_changes_of_no_log_tasks_are_recovered_from_the_recap(tmp_path):
    hidden = {"censored": "the output has been hidden due to the fact that 'no_log: true' was specified"}
    events = [
        {"event": "runner_on_ok", "event_data": {"play": "Slurm", "task": "Install the key", "host": "n1", "res": hidden}},
        {"event": "runner_on_ok", "event_data": {"play": "Slurm", "task": "Install the key", "host": "n2", "res": hidden}},
        {"event": "runner_on_ok", "event_data": {"play": "Slurm", "task": "Restart", "host": "n1", "res": {"changed": True}}},
        {"event": "playbook_on_stats", "event_data": {"changed": {"n1": 2, "n2": 0}}},
    ]
    outcome = playbooks.run(project(tmp_path), progress=playbooks.Progress(out=None), runner_module=FakeRunner(events))
    assert outcome.changes == [playbooks.Change("Slurm", "Restart", "n1"), playbooks.Change("Slurm", "Install the key", "n1")]


def test_recap_lists_every_host_with_its_counts(capsys):
    outcome = playbooks.Outcome(rc=2, status="failed", stats={"ok": {"a": 5, "b": 3}, "changed": {"a": 2},
                                                              "failures": {"b": 1}, "dark": {}})
    playbooks.print_recap(outcome)
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].split() == ["a", "5", "2", "0", "0"]
    assert lines[2].split() == ["b", "3", "0", "1", "0"]
    assert lines[3] == "status: failed (rc 2)"


def test_find_project_walks_up(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCML_PROJECT_DIR", raising=False)
    nested = project(tmp_path) / "a" / "b"
    nested.mkdir(parents=True)
    assert playbooks.find_project(nested) == tmp_path.resolve()
    monkeypatch.setenv("HPCML_PROJECT_DIR", str(tmp_path))
    assert playbooks.find_project(Path("/")) == tmp_path.resolve()


def test_find_project_explains_when_there_is_none(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCML_PROJECT_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match=r"no site\.yml"):
        playbooks.find_project(tmp_path)


def test_failed_commands_are_explained_by_their_own_last_words():
    launch = {"msg": "non-zero return code", "rc": 1,
              "stderr": "2026 tensorflow noise\nbenchrunner: data 'images' needs a data directory\nmpirun: aborted",
              "stdout": ""}
    assert playbooks.failure_message(launch) == "non-zero return code: data 'images' needs a data directory"
    assert playbooks.failure_message({"msg": "non-zero return code", "stderr": "ssh: no route\n"}) == \
        "non-zero return code: ssh: no route"
    assert playbooks.failure_message({"msg": "Data could not be sent", "unreachable": True}) == "Data could not be sent"


def test_reachable_hosts_are_those_that_answered_the_ping(tmp_path):
    runner = FakeRunner([], rc=4, status="failed",
                        stats={"ok": {"node1": 1, "node3": 1}, "dark": {"node2": 1}, "failures": {}})
    assert playbooks.reachable(project(tmp_path), pattern="nodes", runner_module=runner) == ["node1", "node3"]
    assert runner.kwargs["module"] == "ansible.builtin.ping" and runner.kwargs["host_pattern"] == "nodes"
