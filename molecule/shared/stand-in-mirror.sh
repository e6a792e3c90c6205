#!/bin/bash
# Builds a local, signed stand-in for NVIDIA's CUDA and container toolkit repositories (Debian 12 layout and
# package names) so the node-layer roles' mirror, pinning, hold and service steps run for real where NVIDIA's
# servers cannot be reached. The packages hold stand-in files only (an nvcc that prints its version, unit files
# that start nothing); two versions of most packages prove that the pin, not "newest", chooses.
set -euo pipefail
ROOT=${1:-/srv/nvidia-mirror}
CUDA=$ROOT/cuda/repos/debian12/x86_64
CTK=$ROOT/libnvidia-container/stable/deb/amd64
BUILD=$(mktemp -d)
export GNUPGHOME=$ROOT/gnupg
mkdir -p "$CUDA" "$CTK" "$GNUPGHOME"
chmod 700 "$GNUPGHOME"

# deb REPO NAME VERSION DEPENDS [PATH CONTENT MODE]...
deb() {
  local repo=$1 name=$2 version=$3 depends=$4; shift 4
  local dir=$BUILD/$name-$version
  mkdir -p "$dir/DEBIAN"
  while [ $# -gt 0 ]; do
    mkdir -p "$dir$(dirname "$1")"; printf '%b' "$2" > "$dir$1"; chmod "$3" "$dir$1"; shift 3
  done
  {
    echo "Package: $name"; echo "Version: $version"; echo "Architecture: amd64"
    echo "Maintainer: hpcml lab <lab@hpcml.invalid>"; [ -n "$depends" ] && echo "Depends: $depends"
    echo "Description: hpcml lab stand-in for $name"
  } > "$dir/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip --build "$dir" "$repo/${name}_${version}_amd64.deb" >/dev/null
}
unit() { printf '[Unit]\nDescription=stand-in %s\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n' "$1"; }

for v in 580.95.05 580.105.08; do
  deb "$CUDA" libcuda1 "$v-1" ""
  deb "$CUDA" nvidia-driver-cuda "$v-1" "libcuda1 (= $v-1)" \
    /usr/bin/nvidia-smi "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n" 0755
  deb "$CUDA" nvidia-kernel-open-dkms "$v-1" ""
  deb "$CUDA" nvidia-kernel-dkms "$v-1" ""
  deb "$CUDA" nvidia-persistenced "$v-1" "" /usr/lib/systemd/system/nvidia-persistenced.service "$(unit nvidia-persistenced)" 0644
  deb "$CUDA" libnvidia-nscq "$v-1" ""
  deb "$CUDA" nvidia-fabricmanager "$v-1" "libnvidia-nscq (= $v-1)" \
    /usr/lib/systemd/system/nvidia-fabricmanager.service "$(unit nvidia-fabricmanager)" 0644
done
for v in 12.6.3 12.8.1; do
  mm=${v%.*}
  deb "$CUDA" "cuda-toolkit-${mm/./-}" "$v-1" "" \
    "/usr/local/cuda-$mm/bin/nvcc" "#!/bin/sh\necho 'Cuda compilation tools, release $mm, V$v'\n" 0755 \
    "/usr/local/cuda-$mm/lib64/libcudart.so.$v" "" 0644
done
deb "$CUDA" libcudnn9-cuda-12 9.10.2.21-1 "" /usr/lib/x86_64-linux-gnu/libcudnn.so.9.10.2 "" 0644
deb "$CUDA" libcudnn9-dev-cuda-12 9.10.2.21-1 "libcudnn9-cuda-12 (= 9.10.2.21-1)"
for c in 12.9 13.0; do
  deb "$CUDA" libnccl2 "2.27.7-1+cuda$c" "" /usr/lib/x86_64-linux-gnu/libnccl.so.2.27.7 "" 0644
  deb "$CUDA" libnccl-dev "2.27.7-1+cuda$c" "libnccl2 (= 2.27.7-1+cuda$c)"
done
for v in 1.17.8 1.18.0; do
  deb "$CTK" libnvidia-container1 "$v-1" ""
  deb "$CTK" libnvidia-container-tools "$v-1" "libnvidia-container1 (= $v-1)"
  deb "$CTK" nvidia-container-toolkit-base "$v-1" "" \
    /usr/bin/nvidia-container-runtime "#!/bin/sh\nexec runc \"\$@\"\n" 0755
  deb "$CTK" nvidia-container-toolkit "$v-1" "nvidia-container-toolkit-base (= $v-1), libnvidia-container-tools (= $v-1)"
done

if ! gpg --batch --list-secret-keys lab@hpcml.invalid >/dev/null 2>&1; then
  gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key 'hpcml lab mirror <lab@hpcml.invalid>' ed25519 sign never
fi
gpg --batch --armor --export lab@hpcml.invalid > "$ROOT/site-key.asc"
gpg --batch --with-colons --list-keys lab@hpcml.invalid | awk -F: '$1 == "fpr" { print $10; exit }' > "$ROOT/site-key.fpr"
for repo in "$CUDA" "$CTK"; do
  (cd "$repo" && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release &&
   gpg --batch --yes --clearsign -o InRelease Release)
done
rm -rf "$BUILD"
