#!/bin/sh
# Says why Slurm cannot confine jobs with cgroups on this host (exit 1), or nothing (exit 0).
# Containers usually get the controllers read-only; a writable hierarchy is what slurmd needs.
root=/sys/fs/cgroup
if [ -f "$root/cgroup.controllers" ]; then
  [ -w "$root/cgroup.subtree_control" ] || { echo "the cgroup v2 hierarchy ($root) is read-only"; exit 1; }
  for c in cpuset memory; do
    grep -qw "$c" "$root/cgroup.controllers" || { echo "the cgroup v2 controller $c is not available"; exit 1; }
  done
else
  for c in "$@"; do
    [ -d "$root/$c" ] || { echo "the cgroup v1 controller $c is not mounted"; exit 1; }
    [ -w "$root/$c" ] || { echo "$root/$c is read-only (cgroup v1)"; exit 1; }
  done
fi
