"""The repository-key check (package_source's key.yml, which every signed apt repository goes through): exactly the
expected key is installed; a key file holding another key besides it is refused and nothing is installed."""

import pytest
from gpg_home import gpg_home
from playbook_run import play, role_tasks


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two signing keys, each with a subkey; returns their fingerprints and an exporter."""
    with gpg_home(tmp_path_factory.mktemp("gnupg")) as gpg:
        fingerprints = []
        for name in ("repo", "intruder"):
            gpg("--passphrase", "", "--quick-gen-key", f"{name} <{name}@example.org>", "ed25519", "sign", "never")
            listing = gpg("--with-colons", "--list-keys", f"{name}@example.org").stdout.splitlines()
            fpr = next(line.split(":")[9] for i, line in enumerate(listing) if line.startswith("fpr:")
                       and listing[i - 1].startswith("pub:"))
            gpg("--passphrase", "", "--quick-add-key", fpr, "cv25519", "encr", "never")
            fingerprints.append(fpr)

        def export(path, *names):
            path.write_text(gpg("--armor", "--export", *names).stdout)
            return path
        yield fingerprints, export


def install_key(tmp_path, key_file, fingerprint):
    keyrings = tmp_path / "keyrings"
    keyrings.mkdir()
    tasks = role_tasks("package_source", "key")
    tasks[0]["vars"] = {"package_source_repo_name": "unit-repo", "package_source_repo_key_url": f"file://{key_file}",
                        "package_source_repo_key_fingerprint": fingerprint}
    return play(tmp_path, tasks, {"_package_source_keyring_dir": str(keyrings)}), keyrings


def test_the_expected_key_with_its_subkey_is_installed(tmp_path, keys):
    (repo, _), export = keys
    run, keyrings = install_key(tmp_path, export(tmp_path / "repo.asc", "repo@example.org"), repo)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (keyrings / "unit-repo.asc").read_text() == (tmp_path / "repo.asc").read_text()


def test_a_key_file_with_an_extra_key_is_refused_and_nothing_installed(tmp_path, keys):
    (repo, intruder), export = keys
    run, keyrings = install_key(tmp_path, export(tmp_path / "both.asc", "repo@example.org", "intruder@example.org"), repo)
    # gpg lists the keys in the order they were exported.
    assert run.refused(f"holds the key(s) {repo}, {intruder}; expected exactly {repo} and no other"), \
        run.stdout[-3000:]
    assert list(keyrings.iterdir()) == []


def test_another_key_alone_is_refused(tmp_path, keys):
    (repo, intruder), export = keys
    run, keyrings = install_key(tmp_path, export(tmp_path / "other.asc", "intruder@example.org"), repo)
    assert run.refused(f"holds the key(s) {intruder}; expected exactly {repo} and no other"), run.stdout[-3000:]
    assert list(keyrings.iterdir()) == []
