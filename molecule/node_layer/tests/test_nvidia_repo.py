"""The CUDA repository: trusted only through a key checked by fingerprint, and apt reading it signed."""


def test_repository_is_signed_by_the_checked_key(host):
    text = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources").content_string
    assert "URIs: file:///srv/nvidia-mirror/cuda/repos/debian12/x86_64/" in text
    assert "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc" in text
    key = host.file("/etc/apt/keyrings/nvidia-cuda.asc")
    assert key.mode == 0o644 and key.user == "root"
    expected = host.file("/srv/nvidia-mirror/site-key.fpr").content_string.strip()
    shown = host.check_output("gpg --batch --with-colons --show-keys /etc/apt/keyrings/nvidia-cuda.asc")
    assert f"fpr:::::::::{expected}:" in shown


def test_apt_verifies_the_mirror_signature(host):
    policy = host.check_output("apt-cache policy nvidia-driver-cuda")
    assert "file:/srv/nvidia-mirror/cuda/repos/debian12/x86_64" in policy
    # A Release file whose signature does not match is refused: tamper with a copy and ask apt.
    check = host.run(
        "set -e; d=$(mktemp -d); cp -r /srv/nvidia-mirror/cuda/repos/debian12/x86_64/. $d/;"
        " sed -i 's/^Date: .*/Date: Thu, 01 Jan 2026 00:00:00 UTC/' $d/InRelease;"
        " echo \"deb [signed-by=/etc/apt/keyrings/nvidia-cuda.asc] file:$d /\" > /tmp/tampered.list;"
        " apt-get update -o Dir::Etc::sourcelist=/tmp/tampered.list -o Dir::Etc::sourceparts=- 2>&1")
    assert "BADSIG" in check.stdout or "not signed" in check.stdout or "NO_PUBKEY" in check.stdout, check.stdout
