"""What an optional key of a job document means when a request leaves it out: the one home of the job's defaults.

The benchmark role leaves these unset unless the user sets them, the launch command's options read them from here,
and a test keeps the role and the schema from restating any of them. A launcher's settings key is its Settings': their
fields' defaults (benchrunner.launchers.settings_defaults), read here, not restated.
"""

from __future__ import annotations

from typing import Any

from benchrunner import frameworks, launchers, sweep

DEFAULT_NODE_RESULTS_DIR = "/var/lib/hpcml/results"
# The ChestX-ray14-style dataset the benchmark play makes on the job's nodes for real data without a data_dir.
DEFAULT_DATASET = {"dir": "/var/lib/hpcml/datasets/chestxray14-mini", "images": 256, "image_size": 64,
                   "tfrecord_shards": 4}
DEFAULTS: dict[str, Any] = {
    "framework": frameworks.DEFAULT,
    "allreduce": {"min_bytes": sweep.MIN_BYTES, "max_bytes": sweep.MAX_BYTES},
    # benchrunner found on the nodes' PATH; the benchmark play names the one in the nodes' environment.
    "nodes": {"results_dir": DEFAULT_NODE_RESULTS_DIR, "benchrunner": "benchrunner"},
    "env": {},
    "launcher_args": [],
    "git_commit": None,
    "timeout_s": 3600,
    # A rank that beats no more, or a job none of whose ranks completes a step, for this long is a stall: the job is
    # ended and the rank named (benchrunner.watchdog). Longer than a real job's start and slowest step (a first step
    # that compiles included); a job whose timeout_s is shorter than twice this gets half its timeout_s.
    "stall_timeout_s": 300,
    **launchers.settings_defaults(),
}
