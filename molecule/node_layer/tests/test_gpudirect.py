"""GPUDirect RDMA: the route follows the RDMA stack (the scenario's inbox rdma-core: DMA-BUF, no nvidia-peermem unit);
or a reasoned skip."""

from node_layer import assert_skipped, only_on_cpu, only_on_image, record


def test_cpu_node_skips_with_the_reason(host):
    only_on_cpu(host, "gpudirect")
    state = assert_skipped(host, "gpudirect")
    assert (state["route"], state["peermem"], state["ready"]) == (None, False, False)
    assert not host.file("/etc/systemd/system/nvidia-peermem.service").exists


def test_inbox_stack_takes_the_dmabuf_route_without_peermem(host):
    only_on_image(host, "GPUDirect RDMA route")
    state = record(host, "gpudirect")
    assert (state["steps"], state["route"], state["peermem"]) == ("image", "dmabuf", False)
    # nvidia-peermem never loads against the inbox ib_core: nothing loads it, at boot or now.
    assert not host.file("/etc/systemd/system/nvidia-peermem.service").exists
