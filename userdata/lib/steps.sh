# shellcheck shell=bash disable=SC2034,SC2153  # globals shared by the parts of the rendered script
# Each step named in the log; a failing one reports why, once, from the ERR trap.

# fail REASON: non-zero, so the ERR trap reports REASON.
fail() {
  echo "$*" >"$REASON"
  return 1
}

# step NAME FUNCTION: STARTED / COMPLETED with timings; on_error logs ERROR for NAME.
step() {
  local started=$SECONDS
  STEP="$1"
  rm -f "$REASON"
  log "STARTED"
  "$2"
  log "COMPLETED in $((SECONDS - started))s"
}

on_error() {
  local rc="$1" reason
  trap - ERR
  set +e
  # A failing $(...) runs this in its subshell first; only the script itself reports.
  [[ "$BASHPID" == "$$" ]] || exit "$rc"
  reason="$(cat "$REASON" 2>/dev/null)"
  log "ERROR (exit $rc): ${reason:="\"$3\" exited with $rc at line $2"}"
  report_failure "$reason" "$rc"
  exit "$rc"
}
