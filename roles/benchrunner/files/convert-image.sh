#!/bin/sh
# Converts the benchmark image in the control host's podman storage into the file a container runtime runs, once
# per runtime, image ID and what the image is made to hold, and prints {"path", "digest", "changed"} as JSON.
#   convert-image.sh RUNTIME IMAGE IMAGE_ID CACHE_DIR SQUASH_OPTIONS [KIND:MOUNT_POINT ...]
# The file is CACHE_DIR/RUNTIME/IMAGE_ID.SUFFIX, its sha256 beside it in .sha256: both appear only once the
# conversion has finished, so a conversion that failed half-way is made again, never taken as done.
# Charliecloud's file also holds the mount points of the job's binds (KIND directory or file, as benchrunner names
# them) and is packed with mksquashfs's SQUASH_OPTIONS (empty: its own, gzip): both are part of its name, IMAGE_ID-KEY.
# Enroot (Pyxis binds with x-create) and Apptainer make a missing mount point themselves, and pack their own files.
# Command lines, from the runtimes' own documents:
#   charliecloud  the steps of Charliecloud 0.31's ch-convert -i podman -o squash (bin/ch-convert: dockman_to_tar,
#                 mount_points_ensure, cv_dir_squash), less its export, gzip and unpacking round trip: mksquashfs
#                 -b 65536 -noappend -all-root packs the image's root as podman image mount shows it, with a
#                 pseudo-file (-pf) adding ch/environment (the image's environment) and the mount points it lacks;
#                 podman image mount needs a rootful podman, as the control host's is
#   enroot        enroot import -o OUT podman://IMAGE              (Enroot 3.5.0, doc/cmd/import.md)
#   apptainer     apptainer build OUT docker-archive:ARCHIVE       (Apptainer 1.3, "Build a Container"), the archive
#                 written by podman save --format docker-archive
set -eu
runtime=$1 image=$2 id=$3 cache=$4 squash_options=$5
shift 5
fail() { echo "convert-image.sh: $*" >&2; exit "${status:-1}"; }
case $runtime in
  charliecloud)
    suffix=sqfs
    key=$( { echo "$squash_options"; printf '%s\n' "$@" | sort; } | sha256sum | cut -c1-16)
    name=$id-$key.$suffix ;;
  enroot) suffix=sqsh name=$id.$suffix ;;
  apptainer) suffix=sif name=$id.$suffix ;;
  *) status=2 fail "unknown runtime '$runtime' (apptainer, charliecloud, enroot)" ;;
esac

nl='
'
# Adds REL (a path in the image's root, parents first) to the pseudo-file mksquashfs packs beside the root, as TYPE
# d or f: an empty file or a directory, owned by root. The name is quoted, as squashfs-tools 4.5.1's pseudo-file
# definitions allow, with backslashes before quotes and backslashes; the file's content is its command's output.
define() {
  printf '"%s" %s %s root root%s\n' "$(printf '%s' "$1" | sed 's/["\\]/\\&/g')" "$2" "$3" "${4:+ $4}" >> "$pseudo"
  defined=$defined$2\ $1$nl
}

# Whether REL is in the image, or defined, as TYPE d or f; defines it where it is neither.
holds() {
  case $nl$defined in
    *"$nl$2 $1$nl"*) return 0 ;;
    *"$nl"?" $1$nl"*) return 1 ;;
  esac
  if [ -e "$root/$1" ]; then
    test "-$2" "$root/$1"
  elif [ "$2" = d ]; then
    define "$1" d 755
  else
    define "$1" f 644 true
  fi
}

# Makes MOUNT_POINT (an absolute path) in the image as KIND, keeping what the image has; refuses a path through a
# link (ch-run would bind where the link points, and the link may leave the image) or a part of another kind.
mount_point() {
  kind=${1%%:*} path=${1#*:} at="" rest=${1#*:}
  case $kind:$path in
    directory:/* | file:/*) ;;
    *) status=2 fail "mount point '$1' is not KIND:/PATH, KIND one of directory, file" ;;
  esac
  while [ -n "$rest" ]; do
    rest=${rest#/} step=${rest%%/*} rest=${rest#"$step"}
    case $step in '') continue ;; . | ..) fail "mount point $path has a '$step' part" ;; esac
    at=${at:+$at/}$step
    [ ! -h "$root/$at" ] || fail "cannot make mount point $path in $image: /$at is a link in the image"
    if [ -n "$rest" ] || [ "$kind" = directory ]; then
      holds "$at" d || fail "cannot make mount point $path in $image: /$at is not a directory in the image"
    else
      holds "$at" f || fail "cannot make mount point $path in $image: it is not a file in the image"
    fi
  done
}

out=$cache/$runtime/$name
changed=false
if [ ! -f "$out" ] || [ ! -f "$out.sha256" ]; then
  mkdir -p "$cache/$runtime"
  work=$(mktemp -d "$cache/$runtime/.converting.XXXXXX")
  mounted=false
  trap '[ "$mounted" = false ] || podman image unmount "$id" > /dev/null; rm -rf "$work"' EXIT
  part=$work/image.$suffix
  # The converters' scratch (the image exported whole, gigabytes) goes to the cache's disk, removed with the work
  # folder: Apptainer takes TMPDIR, Enroot its ENROOT_TEMP_PATH default ${TMPDIR:-/tmp}.
  export TMPDIR=$work
  case $runtime in
    charliecloud)
      # The image's own root, read-only and copied nowhere (rootful podman): mksquashfs packs it as it is, and
      # what the image lacks is added by the pseudo-file, as ch-convert 0.31 adds its mount points.
      root=$(podman image mount "$id")
      mounted=true
      pseudo=$work/pseudo defined=""
      : > "$pseudo"
      podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$id" > "$work/environment"
      [ -d "$root/ch" ] || define ch d 755
      # sh runs the file's command: the file's name reaches it in the environment, whatever the cache's path holds.
      export CONVERT_IMAGE_ENVIRONMENT="$work/environment"
      # shellcheck disable=SC2016 # expanded by that sh
      define ch/environment f 644 'cat "$CONVERT_IMAGE_ENVIRONMENT"'
      # ch-convert's mount_points_ensure: each only where the image has nothing there (Debian's /bin is a link).
      for point in bin dev etc mnt proc usr mnt/0 mnt/1 mnt/2 mnt/3 mnt/4 mnt/5 mnt/6 mnt/7 mnt/8 mnt/9; do
        [ -e "$root/$point" ] || [ -h "$root/$point" ] || define "$point" d 755
      done
      for point in etc/hosts etc/resolv.conf; do
        [ -e "$root/$point" ] || [ -h "$root/$point" ] || define "$point" f 644 true
      done
      for bind; do
        mount_point "$bind"
      done
      # /dev's contents left out as ch-convert's cv_tar_dir does (ch-run mounts its own /dev); the image's own
      # ch/environment, if any, gives way to the pseudo-file's. As the folder ch-convert unpacks and packs: no
      # extended attributes (its tar keeps none), and a root of mode 755 (the image's mount shows 555). The
      # exclusions go last: mksquashfs reads every argument after -e as one.
      # shellcheck disable=SC2086 # the options are words
      mksquashfs "$root" "$part" -b 65536 -noappend -all-root -no-xattrs -root-mode 755 -pf "$pseudo" \
        $squash_options -wildcards -e 'dev/*' 'dev/.*' ch/environment >&2 ;;
    enroot) enroot import -o "$part" "podman://$image" ;;
    apptainer)
      podman save --format docker-archive -o "$work/image.tar" "$image"
      apptainer build "$part" "docker-archive:$work/image.tar" ;;
  esac
  # The converter must have written a file: one that exits 0 without it is a failure, said here.
  [ -s "$part" ] || fail "$runtime's converter left no image at $part"
  sha256sum "$part" | cut -d' ' -f1 > "$work/digest"
  mv "$part" "$out"
  mv "$work/digest" "$out.sha256"
  changed=true
fi
digest=$(cat "$out.sha256")
printf '{"path": "%s", "digest": "sha256:%s", "changed": %s}\n' "$out" "$digest" "$changed"
