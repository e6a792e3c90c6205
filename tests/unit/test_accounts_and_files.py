"""Accounts and files: bad settings are refused before anything changes, secrets stay out of what is recorded."""

from __future__ import annotations

import grp
import pwd

import pytest
import yaml
from playbook_run import play, role_tasks

from unit_paths import PROJECT

MPI_PREFLIGHT = role_tasks("mpi_ssh", "00-preflight")


def free_uid() -> int:
    return next(uid for uid in range(2001, 60000) if not any(p.pw_uid == uid for p in pwd.getpwall()))


@pytest.mark.parametrize("user", ["root", "daemon", "bin", "nobody", "sshd"])
def test_system_account_names_are_refused(tmp_path, user):
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_user": user, "mpi_ssh_uid": free_uid()})
    assert run.refused(f"mpi_ssh_user '{user}' (uid {free_uid()}, group 'hpcbench') cannot be the MPI account"), \
        run.stdout[-3000:]
    assert "Set mpi_ssh_user and mpi_ssh_group to an account of its own" in " ".join(run.stdout.split())


@pytest.mark.parametrize("uid", [0, 1, 999, 65534, "abc"])
def test_system_uids_are_refused(tmp_path, uid):
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_uid": uid})
    assert run.refused(f"mpi_ssh_user 'hpcbench' (uid {uid}, group 'hpcbench') cannot be the MPI account"), \
        run.stdout[-3000:]


def test_system_group_is_refused(tmp_path):
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_group": "sudo", "mpi_ssh_uid": free_uid()})
    assert run.refused("group 'sudo') cannot be the MPI account"), run.stdout[-3000:]


def test_the_account_ansible_logs_in_as_is_refused(tmp_path):
    # Its authorized_keys would be replaced by the cluster key alone: every node unreachable.
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_user": "ubuntu", "mpi_ssh_uid": free_uid()},
               hostvars={"ansible_user": "ubuntu"})
    assert run.refused("nor the account Ansible logs in as, 'ubuntu'"), run.stdout[-3000:]


def test_an_existing_system_account_on_the_node_is_refused(tmp_path):
    # An account the name list does not know, but the node has with a system uid.
    names = yaml.safe_load((PROJECT / "roles" / "mpi_ssh" / "vars" / "main.yml").read_text())["_mpi_ssh_system_names"]
    account = next((p for p in pwd.getpwall() if 0 < p.pw_uid < 1000 and p.pw_name not in names
                    and p.pw_name.islower() and p.pw_name.replace("-", "").replace("_", "").isalnum()), None)
    if account is None:
        pytest.skip("this machine has no system account outside the known names")
    uid = free_uid()
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_user": account.pw_name, "mpi_ssh_group": "hpcbench", "mpi_ssh_uid": uid})
    assert run.refused(f"node001 already has {account.pw_name} with uid {account.pw_uid}"), run.stdout[-3000:]


def test_a_uid_taken_by_another_account_is_refused(tmp_path):
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_uid": 0, "mpi_ssh_user": "hpcbench"})
    assert run.refused("cannot be the MPI account"), run.stdout[-3000:]
    # Past the name checks, a taken uid >= 1000 is found on the node itself.
    taken = next((p for p in pwd.getpwall() if 1000 <= p.pw_uid < 60000), None)
    if taken is None:
        pytest.skip("this machine has no account with a uid from 1000")
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_uid": taken.pw_uid, "mpi_ssh_user": "hpcbench-unit"})
    assert run.refused(f"node001 already has account {taken.pw_name}"), run.stdout[-3000:]


def test_the_role_itself_stops_before_the_key_pair_is_made(tmp_path):
    keys = tmp_path / "credentials"
    run = play(tmp_path, role_tasks("mpi_ssh"), {"mpi_ssh_user": "root", "mpi_ssh_uid": 0, "mpi_ssh_key_dir": str(keys)})
    assert run.refused("mpi_ssh_user 'root' (uid 0, group 'hpcbench') cannot be the MPI account"), run.stdout[-3000:]
    assert not keys.exists()


def test_a_free_account_passes(tmp_path):
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_user": "hpcbench-unit", "mpi_ssh_group": "hpcbench-unit",
                                         "mpi_ssh_uid": free_uid()})
    assert run.returncode == 0 and run.changed == 0 and run.failed == 0, run.stdout[-3000:]


def test_an_existing_mpi_account_with_its_own_uid_passes(tmp_path):
    # Re-running on a configured node: the account is there with the uid asked for.
    account = next((p for p in pwd.getpwall() if p.pw_uid >= 1000 and p.pw_uid not in (65534,)), None)
    if account is None:
        pytest.skip("this machine has no ordinary account")
    group = grp.getgrgid(account.pw_gid).gr_name
    if account.pw_gid != account.pw_uid:
        pytest.skip("the account's gid differs from its uid")
    run = play(tmp_path, MPI_PREFLIGHT, {"mpi_ssh_user": account.pw_name, "mpi_ssh_group": group,
                                         "mpi_ssh_uid": account.pw_uid})
    assert run.returncode == 0, run.stdout[-3000:]


TEST_CA = PROJECT / "molecule" / "node_base" / "files" / "test-ca.crt"
KEY_BODY = "MC4CAQAwBQYDK2VwBCIEIHvOunitSECRETkeyMATERIALnotForAnyLog0000000"


@pytest.mark.parametrize("header", ["PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
def test_a_ca_file_holding_a_private_key_is_refused_and_not_printed(tmp_path, header):
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text(TEST_CA.read_text() + f"-----BEGIN {header}-----\n{KEY_BODY}\n-----END {header}-----\n")
    run = play(tmp_path, role_tasks("trusted_ca"), {"trusted_ca_files": [str(bundle)]})
    assert run.refused(f"{bundle} (in trusted_ca_files) holds a private key"), run.stdout[-3000:]
    assert KEY_BODY not in run.stdout + run.stderr


def test_a_ca_file_that_is_no_certificate_or_missing_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate\n")
    run = play(tmp_path, role_tasks("trusted_ca", "00-preflight"), {"trusted_ca_files": [str(text)]})
    assert run.refused(f"{text} (in trusted_ca_files) is not a PEM certificate"), run.stdout[-3000:]
    run = play(tmp_path, role_tasks("trusted_ca", "00-preflight"), {"trusted_ca_files": [str(tmp_path / "gone.crt")]})
    assert run.refused(f"{tmp_path / 'gone.crt'} (in trusted_ca_files) is not a file on the control host"), \
        run.stdout[-3000:]


def test_a_certificate_alone_passes(tmp_path):
    run = play(tmp_path, role_tasks("trusted_ca", "00-preflight"), {"trusted_ca_files": [str(TEST_CA)]})
    assert run.returncode == 0 and run.changed == 0, run.stdout[-3000:]
