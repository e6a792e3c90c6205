#!/bin/sh
# Converts the benchmark image in the control host's podman storage into the file a container runtime runs, once
# per runtime and image ID, and prints {"path", "digest", "changed"} as JSON.
#   convert-image.sh RUNTIME IMAGE IMAGE_ID CACHE_DIR
# The file is CACHE_DIR/RUNTIME/IMAGE_ID.SUFFIX, its sha256 beside it in .sha256: both appear only once the
# conversion has finished, so a conversion that failed half-way is made again, never taken as done.
# Command lines, from the runtimes' own documents:
#   charliecloud  ch-convert -i podman -o squash IMAGE OUT         (Charliecloud 0.31, Debian's charliecloud-builders)
#   enroot        enroot import -o OUT podman://IMAGE              (Enroot 3.5.0, doc/cmd/import.md)
#   apptainer     apptainer build OUT docker-archive:ARCHIVE       (Apptainer 1.3, "Build a Container"), the archive
#                 written by podman save --format docker-archive
set -eu
runtime=$1 image=$2 id=$3 cache=$4
case $runtime in
  charliecloud) suffix=sqfs ;;
  enroot) suffix=sqsh ;;
  apptainer) suffix=sif ;;
  *) echo "convert-image.sh: unknown runtime '$runtime' (apptainer, charliecloud, enroot)" >&2; exit 2 ;;
esac
out=$cache/$runtime/$id.$suffix
changed=false
if [ ! -f "$out" ] || [ ! -f "$out.sha256" ]; then
  mkdir -p "$cache/$runtime"
  work=$(mktemp -d "$cache/$runtime/.converting.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  part=$work/image.$suffix
  # The converters' scratch (the image exported whole, gigabytes) goes to the cache's disk, removed with the work
  # folder: ch-convert and Apptainer take TMPDIR, Enroot its ENROOT_TEMP_PATH default ${TMPDIR:-/tmp}.
  export TMPDIR=$work
  case $runtime in
    charliecloud) ch-convert -i podman -o squash "$image" "$part" ;;
    enroot) enroot import -o "$part" "podman://$image" ;;
    apptainer)
      podman save --format docker-archive -o "$work/image.tar" "$image"
      apptainer build "$part" "docker-archive:$work/image.tar" ;;
  esac
  # The converter must have written a file: one that exits 0 without it is a failure, said here.
  [ -s "$part" ] || { echo "convert-image.sh: $runtime's converter left no image at $part" >&2; exit 1; }
  sha256sum "$part" | cut -d' ' -f1 > "$work/digest"
  mv "$part" "$out"
  mv "$work/digest" "$out.sha256"
  changed=true
fi
digest=$(cat "$out.sha256")
printf '{"path": "%s", "digest": "sha256:%s", "changed": %s}\n' "$out" "$digest" "$changed"
