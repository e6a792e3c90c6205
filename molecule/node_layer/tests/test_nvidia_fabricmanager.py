"""Fabric Manager locked to the driver's version and enabled; or a reasoned skip."""

from node_layer import assert_skipped, held, installed_version, only_on_cpu, only_on_image


def test_cpu_node_skips_with_the_reason(host):
    only_on_cpu(host, "nvidia_fabricmanager")
    assert assert_skipped(host, "nvidia_fabricmanager")["nvswitches"] == 0
    assert installed_version(host, "nvidia-fabricmanager") is None


def test_fabric_manager_matches_the_driver_and_is_held(host):
    only_on_image(host, "Fabric Manager packages")
    assert installed_version(host, "nvidia-fabricmanager") == "580.95.05-1"
    assert installed_version(host, "libnvidia-nscq") == "580.95.05-1"
    assert {"nvidia-fabricmanager", "libnvidia-nscq"} <= held(host)
    service = host.service("nvidia-fabricmanager")
    assert service.is_enabled and not service.is_running
