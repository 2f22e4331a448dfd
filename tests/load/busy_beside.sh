#!/usr/bin/env bash
# Runs a command beside busy processes, one pinned to each of the machine's first cores (two by
# default: BUSY_CORES), so the command gets about half of what it would alone, as on a slower or shared
# machine. The busy processes end with the command, whatever way it ends: each also stops by itself
# once this script is gone, and a signal to this script is passed on to the command.
set -Eeuo pipefail

busy_cores=${BUSY_CORES:-2}
cores=$(nproc)
pids=()
command_pid=""

command -v taskset >/dev/null || { echo "busy_beside: taskset (util-linux) is needed to pin the busy processes" >&2; exit 2; }

stop_busy() {
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}

pass_on() {
  [[ -n "$command_pid" ]] && kill -"$1" "$command_pid" 2>/dev/null
  exit $((128 + $(kill -l "$1")))
}

trap stop_busy EXIT
trap 'pass_on TERM' TERM
trap 'pass_on INT' INT
trap 'pass_on HUP' HUP

for ((i = 0; i < busy_cores; i++)); do
  # Busy, with a look every 100k turns at whether this script still runs ($1, expanded by the inner bash).
  # shellcheck disable=SC2016
  taskset -c $((i % cores)) bash -c 'while kill -0 "$1" 2>/dev/null; do for ((n = 0; n < 100000; n++)); do :; done; done' \
    busy "$$" &
  pids+=("$!")
done
sleep 0.2
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || { echo "busy_beside: a busy process could not start (taskset -c on this machine?)" >&2; exit 2; }
done
echo "busy_beside: ${#pids[@]} busy process(es) pinned to cores 0..$((busy_cores - 1)) of ${cores}" >&2

"$@" &
command_pid=$!
wait "$command_pid"
