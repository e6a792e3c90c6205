"""A mirror's login in a repository URL (https://user:password@mirror/...): package_source's repository tasks (which
nvidia_repo, the kubernetes_node and the rdma roles use) write the URL bare to the world-readable source file and the login
to a file only root reads, apt's auth.conf.d or a 0600 .repo file, and never print the password. apt itself, given the
written files, sends the login to a server that asks for it."""

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import http_stub
import pytest
import yaml
from gpg_home import gpg_home
from playbook_run import Run, play, role_tasks

from ansible_collections.hpcml.cluster.plugins.filter.split_userinfo import split_userinfo
from unit_paths import PROJECT

ROLE = PROJECT / "roles" / "package_source"
NVIDIA_REPO = PROJECT / "roles" / "nvidia_repo"
SECRET = "Hunter2pw"
DEBIAN = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
          "distribution_release": "bookworm", "architecture": "x86_64"}
RHEL = {"os_family": "RedHat", "distribution": "RedHat", "distribution_major_version": "9", "architecture": "x86_64"}


@pytest.mark.parametrize(("url", "parts"), [
    ("https://mirror:Hunter2pw@mirror.example/cuda/repos/debian12/x86_64/",
     ("https://mirror.example/cuda/repos/debian12/x86_64/", "mirror", "Hunter2pw",
      "https://mirror.example/cuda/repos/debian12/x86_64/")),
    # Percent-encoded characters are what the server receives decoded; an unencoded '@' belongs to the password.
    ("http://us%40er:p%3Ass@10.0.0.5:8080/doca/?x=1#f", ("http://10.0.0.5:8080/doca/?x=1#f", "us@er", "p:ss",
                                                          "http://10.0.0.5:8080/doca/")),
    ("https://user:p@ss@m.example/k8s/", ("https://m.example/k8s/", "user", "p@ss", "https://m.example/k8s/")),
    # A token alone, as some mirrors take it.
    ("https://t0ken@m.example/", ("https://m.example/", "t0ken", "", "https://m.example/")),
    ("https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/",
     ("https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/", "", "",
      "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/")),
    ("file:///srv/mirror/key.asc", ("file:///srv/mirror/key.asc", "", "", "file:///srv/mirror/key.asc")),
])
def test_split_userinfo(url, parts):
    assert split_userinfo(url) == dict(zip(("url", "username", "password", "machine"), parts))


def role_play(tmp_path: Path, tasks: list, facts: dict, extra: dict, role: Path = ROLE) -> Run:
    """Tasks of a role with its defaults and vars (its OS family's too), as the role would run them on a node with
    these facts."""
    playbook = tmp_path / "play.yml"
    vars_files = [role / "defaults" / "main.yml", role / "vars" / "main.yml", role / "vars" / f"{facts['os_family']}.yml"]
    playbook.write_text(json.dumps([{"hosts": "nodes", "gather_facts": False,
                                     "vars_files": [str(path) for path in vars_files],
                                     "tasks": tasks}]))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"nodes": {"hosts": {"node001": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    # -v and --diff: a task not kept out of the log prints its result and the file it writes, so a password would show.
    completed = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-v", "--diff", "-i", str(inventory),
                                "-e", json.dumps({"ansible_facts": facts, **extra}), str(playbook)],
                               cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    return Run(completed)


def repository_tasks(*names: str) -> list:
    """The repository entry point's tasks by name (repository.yml and its per-family files), templates and included
    files found in the role, file ownership left as is (the tests need not run as root)."""
    chosen = []
    files = ("repository.yml", "repository-Debian.yml", "repository-RedHat.yml")
    for task in [task for name in files for task in yaml.safe_load((ROLE / "tasks" / name).read_text())]:
        if not any(task["name"].startswith(name) for name in names):
            continue
        task = dict(task)
        module = next(key for key in task if key.startswith("ansible."))
        args = task[module] = task[module] if isinstance(task[module], str) else dict(task[module])
        if module == "ansible.builtin.include_tasks":
            task[module] = str(ROLE / "tasks" / args)
        else:
            for key in ("owner", "group"):
                args.pop(key, None)
            if module == "ansible.builtin.template":
                args["src"] = str(ROLE / "templates" / args["src"])
        chosen.append(task)
    assert len(chosen) == len(names), [task["name"] for task in chosen]
    return chosen


def apt_repository(tmp_path: Path, url: str) -> tuple[Run, Path, Path]:
    sources, auth = tmp_path / "sources.list.d", tmp_path / "auth.conf.d"
    sources.mkdir(exist_ok=True)
    auth.mkdir(exist_ok=True)
    tasks = repository_tasks("Check the repository's login", "Describe the repository (apt)",
                             "Give apt the repository's login")
    # apt_login.yml writes as root on a node; here the owner is whoever runs the test.
    login = yaml.safe_load((ROLE / "tasks" / "apt_login.yml").read_text())
    for task in login:
        for module in ("ansible.builtin.copy",):
            if module in task:
                task[module] = {k: v for k, v in task[module].items() if k not in ("owner", "group")}
    (tmp_path / "login.yml").write_text(yaml.safe_dump(login))
    tasks[-1]["ansible.builtin.include_tasks"] = str(tmp_path / "login.yml")
    run = role_play(tmp_path, tasks, DEBIAN, {
        "package_source_repo_name": "nvidia-cuda", "package_source_repo_url": url,
        "package_source_repo_key_url": url + "3bf863cc.pub",
        "_package_source_apt_sources_dir": str(sources), "_package_source_apt_auth_dir": str(auth)})
    return run, sources / "nvidia-cuda.sources", auth / "nvidia-cuda.conf"


def test_apt_source_file_has_the_bare_url_and_the_login_goes_to_a_private_auth_file(tmp_path):
    url = f"https://mirror:{SECRET}@mirror.example/cuda/repos/debian12/x86_64/"
    run, source, auth = apt_repository(tmp_path, url)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "URIs: https://mirror.example/cuda/repos/debian12/x86_64/\n" in source.read_text()
    assert SECRET not in source.read_text() and "mirror@" not in source.read_text()
    assert stat.S_IMODE(source.stat().st_mode) == 0o644
    assert auth.read_text() == f"machine https://mirror.example/cuda/repos/debian12/x86_64/ login mirror password {SECRET}\n"
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert SECRET not in run.stdout + run.stderr

    # The login dropped from the URL: its file goes, the source file stays as it was.
    again, source_again, _ = apt_repository(tmp_path, "https://mirror.example/cuda/repos/debian12/x86_64/")
    assert again.returncode == 0, again.stdout[-3000:]
    assert not auth.exists()
    assert source_again.read_text() == source.read_text()


def test_a_login_apt_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    run, source, auth = apt_repository(tmp_path, f"https://mirror:{SECRET}%20x@mirror.example/cuda/")
    assert run.refused("The user or password in https://***@mirror.example/cuda/ or "
                       "https://***@mirror.example/cuda/3bf863cc.pub holds a space, tab or line break"), \
        run.stdout[-3000:]
    assert not source.exists() and not auth.exists()
    assert SECRET not in run.stdout + run.stderr


class _Mirror(http_stub.Handler):
    """A mirror that answers only requests carrying its login."""
    login = "Basic " + base64.b64encode(f"mirror:{SECRET}".encode()).decode()
    seen: ClassVar[list] = []

    def do_GET(self):
        _Mirror.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != self.login:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
            self.end_headers()
            return
        self.send_body(b"Origin: unit mirror\n")


@pytest.mark.skipif(not Path("/usr/lib/apt/apt-helper").exists(), reason="needs apt (Debian or Ubuntu)")
def test_apt_sends_the_written_login_to_the_mirror(tmp_path):
    with http_stub.serving(_Mirror) as port:
        base = f"http://127.0.0.1:{port}/cuda/repos/debian12/x86_64/"
        run, _, auth = apt_repository(tmp_path, base.replace("http://", f"http://mirror:{SECRET}@"))
        assert run.returncode == 0, run.stdout[-3000:]
        # apt (apt-helper, the same acquire code apt update uses) with only the written login files.
        fetch = subprocess.run(["/usr/lib/apt/apt-helper", "-o", f"Dir::Etc::netrcparts={auth.parent}",
                                "-o", "Dir::Etc::netrc=/dev/null", "-o", "APT::Sandbox::User=root",
                                "download-file", base + "InRelease", str(tmp_path / "InRelease")],
                               capture_output=True, text=True, check=False)
        assert fetch.returncode == 0, fetch.stdout + fetch.stderr
        assert (tmp_path / "InRelease").read_text() == "Origin: unit mirror\n"
        # Outside the repository's path the login is not sent.
        elsewhere = subprocess.run(["/usr/lib/apt/apt-helper", "-o", f"Dir::Etc::netrcparts={auth.parent}",
                                    "-o", "Dir::Etc::netrc=/dev/null", "-o", "APT::Sandbox::User=root",
                                    "download-file", f"http://127.0.0.1:{port}/other/InRelease",
                                    str(tmp_path / "other")], capture_output=True, text=True, check=False)
        assert elsewhere.returncode != 0 and _Mirror.seen[-1] == ("/other/InRelease", None)


def dnf_repository(tmp_path: Path, url: str) -> tuple[Run, Path]:
    repos = tmp_path / "yum.repos.d"
    repos.mkdir(exist_ok=True)
    tasks = repository_tasks("Make the repository file private", "Describe the repository (dnf)")
    run = role_play(tmp_path, tasks, RHEL, {
        "package_source_repo_name": "nvidia-cuda", "package_source_repo_url": url,
        "package_source_repo_key_url": url + "D42D0685.pub", "_package_source_yum_dir": str(repos)})
    return run, repos / "nvidia-cuda.repo"


def test_dnf_repo_file_keeps_the_login_in_its_own_options_and_is_private(tmp_path):
    repo = tmp_path / "yum.repos.d" / "nvidia-cuda.repo"
    repo.parent.mkdir()
    # Written earlier without a login, world-readable.
    repo.write_text("[nvidia-cuda]\nname = nvidia-cuda\nbaseurl = https://mirror.example/cuda/repos/rhel9/x86_64/\n")
    repo.chmod(0o644)
    run, repo = dnf_repository(tmp_path, f"https://mirror:{SECRET}@mirror.example/cuda/repos/rhel9/x86_64/")
    assert run.returncode == 0, run.stdout[-3000:]
    text = repo.read_text()
    assert "baseurl = https://mirror.example/cuda/repos/rhel9/x86_64/\n" in text
    assert "gpgkey = https://mirror.example/cuda/repos/rhel9/x86_64/D42D0685.pub\n" in text
    assert "username = mirror\n" in text and f"password = {SECRET}\n" in text
    assert text.count(SECRET) == 1
    assert stat.S_IMODE(repo.stat().st_mode) == 0o600
    assert SECRET not in run.stdout + run.stderr


def test_dnf_repo_file_without_a_login_stays_world_readable(tmp_path):
    run, repo = dnf_repository(tmp_path, "https://mirror.example/cuda/repos/rhel9/x86_64/")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "username" not in repo.read_text() and "password" not in repo.read_text()
    assert stat.S_IMODE(repo.stat().st_mode) == 0o644


@pytest.mark.skipif(shutil.which("gpg") is None, reason="needs gpg")
def test_the_key_is_fetched_with_the_login_and_the_password_never_printed(tmp_path):
    with gpg_home(tmp_path / "gnupg") as gpg:
        gpg("--passphrase", "", "--quick-gen-key", "repo <repo@example.org>", "ed25519", "sign", "never")
        listing = gpg("--with-colons", "--list-keys").stdout
        fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
        key = gpg("--armor", "--export", text=False).stdout

    class KeyMirror(_Mirror):
        def do_GET(self):
            if self.headers.get("Authorization") != self.login:
                self.send_response(404)  # as mirrors that hide from anonymous requests answer
                self.end_headers()
                return
            self.send_body(key)

    with http_stub.serving(KeyMirror) as port:
        keyrings = tmp_path / "keyrings"
        keyrings.mkdir()
        tasks = role_tasks("package_source", "key")
        tasks[0]["vars"] = {"package_source_repo_name": "unit-repo", "package_source_repo_key_fingerprint": fingerprint,
                            "package_source_repo_key_url": f"http://mirror:{SECRET}@127.0.0.1:{port}/k.asc"}
        run = play(tmp_path, tasks, {"_package_source_keyring_dir": str(keyrings)})
        assert run.returncode == 0, run.stdout[-3000:]
        assert (keyrings / "unit-repo.asc").read_bytes() == key
        assert SECRET not in run.stdout + run.stderr


def test_preflight_refuses_a_debian_mirror_login_apt_cannot_hold_and_names_mirrors_without_passwords(tmp_path):
    run = role_play(tmp_path, role_tasks("nvidia_repo", "00-preflight"), DEBIAN, {
        "nvidia_repo_source": "distro", "nvidia_repo_debian_mirror": f"https://deb:{SECRET}%09@mirror.example/debian"},
        NVIDIA_REPO)
    assert run.refused("The user or password in nvidia_repo_debian_mirror (https://***@mirror.example/debian) holds a "
                       "space, tab or line break"), run.stdout[-3000:]
    bad_scheme = role_play(tmp_path, role_tasks("nvidia_repo", "00-preflight"), DEBIAN, {
        "nvidia_repo_source": "mirror", "nvidia_repo_mirror_url": f"ftp://m:{SECRET}@mirror.example/nvidia"}, NVIDIA_REPO)
    assert bad_scheme.refused("'mirror' needs nvidia_repo_mirror_url (http://, https:// or file://; now "
                              "'ftp://***@mirror.example/nvidia')"), bad_scheme.stdout[-3000:]
    assert SECRET not in run.stdout + run.stderr + bad_scheme.stdout + bad_scheme.stderr
