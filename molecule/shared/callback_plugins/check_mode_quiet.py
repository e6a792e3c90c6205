"""Fails a check-mode run that predicts a change: molecule's check phase runs after converge and idempotence, on a
node the roles have just converged, so a change there is a task whose check mode is wrong (it would report drift that
is not there, or hide the real one behind noise). Molecule itself only fails a check run whose tasks fail."""

from __future__ import annotations

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: check_mode_quiet
type: aggregate
short_description: Fail a check-mode run in which any task reports a change
description:
  - In check mode (--check), remembers every task result that reports a change and, when the run ends, fails it
    naming each host and task. Outside check mode it does nothing.
requirements:
  - enabled in the callbacks list (callbacks_enabled)
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "check_mode_quiet"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.changed: list[str] = []

    def v2_runner_on_ok(self, result) -> None:
        if context.CLIARGS.get("check") and result._result.get("changed"):
            self.changed.append(f"{result._host.get_name()}: {result._task.get_name()}")

    def v2_playbook_on_stats(self, stats) -> None:
        if not context.CLIARGS.get("check"):
            return
        # The recap's count as well, so a change the results above did not show (a handler, an item) is not missed.
        hosts = {host: stats.summarize(host)["changed"] for host in sorted(stats.processed)}
        if self.changed or any(hosts.values()):
            named = "; ".join(self.changed) or "see the recap"
            # ansible-core turns a callback's error into a warning, but lets AssertionError through, for tests.
            raise AssertionError(f"check mode on converged nodes predicted changes ({hosts}): {named}")
