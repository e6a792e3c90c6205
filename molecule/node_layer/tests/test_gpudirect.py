"""nvidia-peermem: loaded by a unit ordered after the driver and the RDMA stack; or a reasoned skip."""

from node_layer import assert_skipped, is_image, record


def test_cpu_node_skips_with_the_reason(host):
    if is_image(host):
        return
    state = assert_skipped(host, "gpudirect")
    assert (state["peermem"], state["ready"]) == (False, False)
    assert not host.file("/etc/systemd/system/nvidia-peermem.service").exists


def test_peermem_unit_loads_after_driver_and_rdma(host):
    if not is_image(host):
        return
    unit = host.file("/etc/systemd/system/nvidia-peermem.service").content_string
    assert "ExecStart=/sbin/modprobe nvidia-peermem" in unit
    after = host.check_output("systemctl show -p After nvidia-peermem.service")
    assert "openibd.service" in after and "nvidia-persistenced.service" in after
    assert host.service("nvidia-peermem").is_enabled
    # An image loads nothing.
    assert not host.service("nvidia-peermem").is_running


def test_retired_module_cannot_load(host):
    if not is_image(host):
        return
    text = host.file("/etc/modprobe.d/blacklist-nv_peer_mem.conf").content_string
    assert "install nv_peer_mem /bin/false" in text
    assert record(host, "gpudirect")["steps"] == "image"
