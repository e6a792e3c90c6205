"""GPUDirect RDMA: the route follows the RDMA stack (the scenario's inbox rdma-core: DMA-BUF, no nvidia-peermem unit)."""

from node_layer import record


def test_inbox_stack_takes_the_dmabuf_route_without_peermem(host):
    state = record(host, "gpudirect")
    assert (state["steps"], state["route"], state["peermem"]) == ("image", "dmabuf", False)
    # nvidia-peermem never loads against the inbox ib_core: nothing loads it, at boot or now.
    assert not host.file("/etc/systemd/system/nvidia-peermem.service").exists
