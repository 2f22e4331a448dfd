#!/usr/bin/env bash
# Runs a command beside busy processes, one pinned to each of the machine's first cores (two by
# default: BUSY_CORES), so the command gets about half of what it would alone, as on a shared or
# slower machine. The busy processes end with the command, whatever way it ends.
set -Eeuo pipefail

busy_cores=${BUSY_CORES:-2}
cores=$(nproc)
pids=()

stop_busy() {
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_busy EXIT

for ((i = 0; i < busy_cores; i++)); do
  taskset -c $((i % cores)) bash -c 'while :; do :; done' &
  pids+=("$!")
done
echo "busy_beside: ${#pids[@]} busy process(es) pinned to cores 0..$((busy_cores - 1)) of ${cores}" >&2
"$@"
