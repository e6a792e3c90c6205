#!/usr/bin/env bash
# Wall time of the bare-metal stack play (playbooks/baremetal.yml: Open MPI, the MPI account, the Python
# environment from the cached wheelhouse, benchrunner, MUNGE and Slurm) on fresh lab nodes: 1 node that is
# also Slurm's controller, then a head and 2 compute nodes; printed side by side with their ratio.
# Each lab gets the node layer first, untimed. `make bench-stack`; replaces the running lab.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_STDOUT_CALLBACK=ansible.builtin.null

declare -A seconds
for shape in "1 false" "2 true"; do
  read -r nodes head <<<"$shape"
  make --no-print-directory lab-down >/dev/null
  make --no-print-directory lab-up LAB_NODES="$nodes" LAB_HEAD="$head" >/dev/null
  ansible-playbook site.yml --skip-tags baremetal,benchmark >/dev/null
  start=$(date +%s.%N)
  ansible-playbook playbooks/baremetal.yml >/dev/null
  end=$(date +%s.%N)
  machines=$nodes
  [ "$head" = true ] && machines=$((nodes + 1))
  seconds[$machines]=$(awk "BEGIN { print $end - $start }")
  printf 'bare-metal stack play, %d machine(s): %.1f s\n' "$machines" "${seconds[$machines]}"
done
printf 'ratio 3 / 1 machines: %.2f\n' "$(awk "BEGIN { print ${seconds[3]} / ${seconds[1]} }")"
