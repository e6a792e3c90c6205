"""Charliecloud on the compute node (hpc_containers, cluster_container_runtimes: [charliecloud]): Debian's runtime
and what it needs of the node, usable by the benchmark's account; nothing on the head, which trains nothing."""

import pytest
import testinfra

COMPUTE = ["mol-slurm-c1"]
HEAD = "mol-slurm-head"
# The cluster role's default cluster_mpi_user.
ACCOUNT = "hpcbench"


@pytest.fixture(scope="module", params=COMPUTE)
def node(request):
    return testinfra.get_host(f"podman://{request.param}")


def test_charliecloud_and_fuse_packages_are_installed(node):
    for package in ("charliecloud-runtime", "squashfuse", "libsquashfuse0", "fuse3"):
        assert node.package(package).is_installed, package
    assert node.package("charliecloud-runtime").version.startswith("0.31")


def test_ch_run_answers_as_the_benchmark_account(node):
    run = node.run(f"runuser -u {ACCOUNT} -- ch-run --version")
    assert run.rc == 0, run.stderr
    # ch-run prints its version on stderr.
    assert (run.stdout + run.stderr).strip().startswith("0.31"), run.stdout + run.stderr


def test_dev_fuse_is_open_to_every_account(node):
    fuse = node.file("/dev/fuse")
    # testinfra's File has no test for a device: stat names the kind.
    assert node.run("stat -c %F /dev/fuse").stdout.strip() == "character special file"
    assert fuse.mode == 0o666
    assert node.run(f"runuser -u {ACCOUNT} -- sh -c ': < /dev/fuse'").rc == 0


def test_user_namespaces_are_on(node):
    assert int(node.file("/proc/sys/user/max_user_namespaces").content_string) > 0
    clone = node.file("/proc/sys/kernel/unprivileged_userns_clone")
    if not clone.exists:
        pytest.skip("this kernel has no kernel.unprivileged_userns_clone (Debian's patch): nothing to check")
    assert clone.content_string.strip() == "1"


def test_the_head_gets_no_runtime():
    head = testinfra.get_host(f"podman://{HEAD}")
    assert not head.package("charliecloud-runtime").is_installed
