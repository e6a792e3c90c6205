"""The driver: exact version from the repository, held, nouveau kept away, persistenced enabled."""

from node_layer import held, installed_version, record

PACKAGES = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced"]


def test_exact_version_is_installed_although_a_newer_one_exists(host):
    assert "580.105.08-1" in host.check_output("apt-cache madison nvidia-driver-cuda")
    for package in [*PACKAGES, "libcuda1"]:
        assert installed_version(host, package) == "580.95.05-1", package


def test_driver_is_pinned_and_held(host):
    assert set(PACKAGES) <= held(host)
    pref = host.file("/etc/apt/preferences.d/hpcml-nvidia-driver.pref").content_string
    assert "Pin: version 580.95.05-*" in pref
    assert "Pin-Priority: 1001" in pref
    # A library the role does not name is pinned through its pattern (libcuda*): the newer version stays at 500.
    policy = host.check_output("apt-cache policy libcuda1")
    assert "580.95.05-1 1001" in policy and "580.105.08-1 500" in policy, policy
    upgrade = host.check_output("apt-get -s dist-upgrade")
    assert "nvidia" not in upgrade and "libcuda" not in upgrade


def test_nouveau_is_blacklisted_and_options_set(host):
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert "options nvidia NVreg_EnableStreamMemOPs=1" in host.file("/etc/modprobe.d/nvidia-hpcml.conf").content_string


def test_image_enables_persistenced_without_loading_anything(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert not service.is_running
    state = record(host, "nvidia_driver")
    assert state["steps"] == "image"
    assert state["held"] is True
    assert state["reboot_required"] is False
    assert state["loaded_version"] is None
