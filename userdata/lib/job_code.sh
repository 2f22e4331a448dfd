# shellcheck shell=bash
# The job's own code and its setup command.

job_code() {
  local tmp
  mkdir -p "$WORKDIR"
  if [[ -z "${SPOT_CODE_URI:-}" || "$(cat "$STATE_DIR/code-from" 2>/dev/null)" == "$SPOT_CODE_URI" ]]; then
    log "workdir $WORKDIR ready (code: ${SPOT_CODE_URI:-none})"
    return 0
  fi
  tmp="$(mktemp -d)"
  s3_get "$SPOT_CODE_URI" "$tmp/code.zip"
  "$PYTHON" -m zipfile -e "$tmp/code.zip" "$WORKDIR" 2>"$REASON" ||
    fail "$SPOT_CODE_URI is not a readable zip: $(tail -n 1 "$REASON")"
  rm -rf "$tmp"
  echo "$SPOT_CODE_URI" >"$STATE_DIR/code-from"
  log "job code from $SPOT_CODE_URI unpacked into $WORKDIR"
}

# Once per instance: the marker keeps a reboot or a rerun from repeating it.
setup_command() {
  local marker="$STATE_DIR/setup-done"
  [[ -n "${SPOT_SETUP_COMMAND:-}" && "$(cat "$marker" 2>/dev/null)" != "$SPOT_SETUP_COMMAND" ]] || return 0
  log "running in $WORKDIR: $SPOT_SETUP_COMMAND (output in this log)"
  (cd "$WORKDIR" && PATH="${PYTHON%/*}:$PATH" bash -c "$SPOT_SETUP_COMMAND") >>"$LOG_FILE" 2>&1 ||
    fail "setup command exited with $? (its output is in $LOG_FILE)"
  echo "$SPOT_SETUP_COMMAND" >"$marker"
}
