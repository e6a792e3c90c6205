"""The filter every recorded URL passes through: a mirror's user and password never reach a fact or result file."""

import json
import stat
import subprocess

import pytest
from playbook_run import play, role_tasks

from ansible_collections.hpcml.cluster.plugins.filter.redact_userinfo import redact_userinfo
from unit_paths import PROJECT


@pytest.mark.parametrize(("given", "recorded"), [
    ("https://user:s3cret@mirror.example/cuda", "https://***@mirror.example/cuda"),
    ("http://token@mirror.example:8080/x?y=1", "http://***@mirror.example:8080/x?y=1"),
    # An unencoded '@' in the password: everything up to the host goes.
    ("https://user:p@ss@mirror.example/", "https://***@mirror.example/"),
    ("--index-url https://u:p@pypi.example/simple --trusted-host pypi.example",
     "--index-url https://***@pypi.example/simple --trusted-host pypi.example"),
    ("deb [signed-by=/k.gpg] HTTPS://u:p@m.example/ /", "deb [signed-by=/k.gpg] HTTPS://***@m.example/ /"),
    # No userinfo: untouched, e-mail addresses and '@' in paths included.
    ("https://mirror.example/cuda", "https://mirror.example/cuda"),
    ("https://mirror.example/~user@x", "https://mirror.example/~user@x"),
    ("ops@example.com", "ops@example.com"),
    ("", ""),
])
def test_userinfo_is_replaced_in_strings(given, recorded):
    assert redact_userinfo(given) == recorded


def test_every_string_however_deep_is_redacted_and_other_values_kept():
    record = {"steps": "configure", "reason": None, "count": 2, "ok": True,
              "urls": ["https://a:b@m1/", {"nested": ("ftp://c@m2/",)}], "https://k:v@m3/": "key"}
    assert redact_userinfo(record) == {"steps": "configure", "reason": None, "count": 2, "ok": True,
                                       "urls": ["https://***@m1/", {"nested": ["ftp://***@m2/"]}],
                                       "https://***@m3/": "key"}


def test_a_role_record_keeps_no_mirror_credentials(tmp_path):
    # node_facts' record, as nvidia_repo calls it with a mirror that takes a password.
    facts = tmp_path / "facts.d"
    task = role_tasks("node_facts", "record")
    task[0]["vars"] = {"node_facts_fact_file": str(facts / "hpcml_hardware.fact"), "node_facts_record_name": "nvidia_repo",
                       "node_facts_record_state": {"steps": "configure", "reason": "", "source": "mirror",
                                                   "cuda_url": "https://mirror:Hunter2pw@mirror.example/cuda/repos/x/"}}
    task.append({"name": "Show what later roles see", "ansible.builtin.debug": {"var": "node_facts_records"}})
    run = play(tmp_path, task, {"node_facts_hardware": {}})
    assert run.returncode == 0, run.stdout[-3000:]
    record = facts / "hpcml_nvidia_repo.fact"
    assert json.loads(record.read_text())["cuda_url"] == "https://***@mirror.example/cuda/repos/x/"
    assert stat.S_IMODE(record.stat().st_mode) == 0o644
    assert "Hunter2pw" not in record.read_text()
    assert "Hunter2pw" not in run.stdout + run.stderr
    assert "https://***@mirror.example/cuda/repos/x/" in run.stdout


@pytest.mark.parametrize("path", ["inventory/lab/credentials/mpi_ssh_ed25519", "inventory/site/a/credentials/key",
                                  "credentials/key", "playbooks/credentials/munge.key"])
def test_credentials_directories_are_ignored_at_any_depth(path):
    check = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=PROJECT, check=False)
    assert check.returncode == 0, f"{path} is not ignored by .gitignore"
