"""CUDA toolkits side by side, the default selectable, cuDNN and NCCL at exact versions."""

from node_layer import held, installed_version, record


def test_two_toolkits_side_by_side(host):
    assert installed_version(host, "cuda-toolkit-12-6") == "12.6.3-1"
    assert installed_version(host, "cuda-toolkit-12-8") == "12.8.1-1"
    assert {"cuda-toolkit-12-6", "cuda-toolkit-12-8"} <= held(host)
    # /usr/local/cuda -> /etc/alternatives/cuda -> the default toolkit, switchable with update-alternatives.
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.8"
    assert "Value: /usr/local/cuda-12.8" in host.check_output("update-alternatives --query cuda")


def test_login_shell_gets_the_default_and_can_switch(host):
    assert "release 12.8" in host.check_output("bash -lc 'nvcc --version'")
    switched = host.check_output("bash -lc '. /etc/hpcml/cuda/12.6.sh; nvcc --version; echo $LD_LIBRARY_PATH'")
    assert "release 12.6" in switched
    assert "/usr/local/cuda-12.6/lib64" in switched and "/usr/local/cuda/lib64" not in switched


def test_cudnn_and_nccl_exact_builds(host):
    assert installed_version(host, "libcudnn9-cuda-12") == "9.10.2.21-1"
    # The mirror also has the CUDA 13.0 build of the same NCCL: the revision pin picks the 12.9 one.
    assert installed_version(host, "libnccl2") == "2.27.7-1+cuda12.9"
    assert {"libnccl2", "libnccl-dev", "libcudnn9-cuda-12"} <= held(host)
    assert record(host, "cuda_toolkit")["nccl"] == "2.27.7"
