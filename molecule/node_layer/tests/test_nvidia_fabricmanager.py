"""Fabric Manager locked to the driver's version and enabled."""

from node_layer import held, installed_version


def test_fabric_manager_matches_the_driver_and_is_held(host):
    assert installed_version(host, "nvidia-fabricmanager") == "580.95.05-1"
    assert installed_version(host, "libnvidia-nscq") == "580.95.05-1"
    assert {"nvidia-fabricmanager", "libnvidia-nscq"} <= held(host)
    service = host.service("nvidia-fabricmanager")
    assert service.is_enabled and not service.is_running
