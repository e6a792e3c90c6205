"""The container toolkit at its version, with containerd running the nvidia runtime; or a reasoned skip."""

from node_layer import assert_skipped, held, installed_version, is_image


def test_cpu_node_skips_with_the_reason(host):
    if is_image(host):
        return
    assert_skipped(host, "nvidia_container_toolkit")
    assert installed_version(host, "nvidia-container-toolkit") is None


def test_toolkit_is_pinned_and_held(host):
    if not is_image(host):
        return
    assert "1.18.0-1" in host.check_output("apt-cache madison nvidia-container-toolkit")
    assert installed_version(host, "nvidia-container-toolkit") == "1.17.8-1"
    assert installed_version(host, "nvidia-container-toolkit-base") == "1.17.8-1"
    assert "nvidia-container-toolkit" in held(host)


def test_containerd_runs_with_the_nvidia_runtime_as_default(host):
    if not is_image(host):
        return
    assert host.service("containerd").is_running
    # What containerd itself parsed, not what the file says.
    dump = host.check_output("containerd config dump")
    assert 'default_runtime_name = "nvidia"' in dump
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in dump
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump
