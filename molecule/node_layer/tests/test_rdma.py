"""The inbox RDMA stack with its tools, from Debian's own packages."""

from node_layer import installed_version, record


def test_inbox_stack_and_tools_are_installed(host):
    for package in ("rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags", "perftest"):
        assert installed_version(host, package), package
    for tool in ("ibstat", "ibv_devinfo", "ib_write_bw", "ib_read_lat"):
        assert host.exists(tool), tool
    # The verbs library loads and finds no adapter: "No IB devices found", or, where the kernel has no
    # RDMA support at all (as in this lab), "Failed to get IB devices list".
    probe = host.run("ibv_devinfo")
    assert probe.rc != 0
    assert "IB devices" in probe.stdout + probe.stderr
    state = record(host, "rdma")
    assert (state["steps"], state["stack"], state["firmware_update"]) == ("image", "inbox", False)
