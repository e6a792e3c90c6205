#!/usr/bin/env bash
# Builds the lab node image: a minimal Debian root with systemd, sshd and python3 -
# what a freshly installed bare machine offers Ansible, nothing more.
# mmdebstrap + `podman import` because no registry can be reached. mmdebstrap rather than debootstrap: apt downloads
# the packages side by side, where debootstrap fetches them one at a time (19 s against 47 s for this root, 2026-11-24).
# Usage: build-image.sh IMAGE SUITE MIRROR REVISION (REVISION is labelled on the image, so a changed
# build is noticed and rebuilt)
set -euo pipefail
image=${1:?image name}
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}
revision=${4:?revision}

work=$(mktemp -d /var/tmp/hpcml-lab-rootfs.XXXXXX)
# A half-built root must never survive a failure: the next run starts clean.
trap 'rm -rf "$work"' EXIT

# As debootstrap's minbase: Priority required and apt, /usr merged by symlinks with usr-is-merged (without the hook,
# apt picks usrmerge, which brings perl onto a machine that should not have it). Into a directory the steps below finish.
mmdebstrap --quiet --mode=root --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include=systemd,systemd-sysv,dbus,openssh-server,python3,sudo,ca-certificates,iproute2,procps,kmod,pciutils \
  "$suite" "$work/root" "$mirror"

root=$work/root
# Containers have no consoles or hardware clock; these units only fail and slow boot.
for unit in getty@tty1.service console-getty.service systemd-udevd.service \
            systemd-udev-trigger.service systemd-modules-load.service \
            sys-kernel-config.mount sys-kernel-debug.mount systemd-remount-fs.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Host keys are made per node at first boot, not baked into the shared image.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
cat > "$root/etc/systemd/system/ssh.service.d/hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\n' \
  > "$root/etc/ssh/sshd_config.d/lab.conf"
echo "deb $mirror $suite main" > "$root/etc/apt/sources.list"
echo "deb $mirror $suite-updates main" >> "$root/etc/apt/sources.list"
# Every node its own machine-id, made at first boot from podman's container_uuid, as every real machine has its
# own: systemd copies dbus's when /etc/machine-id is empty, and the image's dbus may hold one made for the whole image.
: > "$root/etc/machine-id"
ln -sf /etc/machine-id "$root/var/lib/dbus/machine-id"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# Ansible's module runs on the nodes keep the code they compile from their payload zips (zipimport_cache.py says why);
# the folder is root's alone, as the cache requires.
pydist=$root/usr/lib/python3/dist-packages
install -m 0644 "$(dirname "$0")/zipimport_cache.py" "$pydist/hpcml_lab_zipimport_cache.py"
echo 'import hpcml_lab_zipimport_cache; hpcml_lab_zipimport_cache.install()' > "$pydist/hpcml_lab_zipimport_cache.pth"
cache=$(chroot "$root" python3 -c 'import hpcml_lab_zipimport_cache as c; print(c.CACHE_DIR)')
install -d -m 0755 "$root$(dirname "$(dirname "$cache")")" "$root$(dirname "$cache")" "$root$cache"
chroot "$root" python3 -c 'import sys, zipimport; sys.exit(zipimport._compile_source.__name__ != "cached")' \
  || { echo "build-image.sh: the zipimport cache is not in front of zipimport's compile" >&2; exit 1; }

tar -C "$root" -c . | podman import \
  --change 'CMD ["/sbin/init"]' \
  --change 'ENV container=podman' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL hpcml.lab-image-revision=$revision" \
  - "$image"
