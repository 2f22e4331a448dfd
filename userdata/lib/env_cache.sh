# shellcheck shell=bash disable=SC2034  # globals shared by the parts of the rendered script
# The job's environment from the env cache in its bucket, or installed, then stored there: the runtime's
# spot_trainer.environment does it (from the wheel before it is installed, with the image's python3).

env_restore() {
  [[ "${SPOT_ENV_CACHE:-true}" == true && "$SPOT_TRAINER_PACKAGE" == s3://* ]] || return 0
  WHEEL="$STATE_DIR/runtime.whl"
  # One try: when it fails, the runtime's own step retries, and fails there and says why if it must.
  "$AWS_CLI" s3 cp --only-show-errors "$SPOT_TRAINER_PACKAGE" "$WHEEL" 2>/dev/null || return 0
  if env_run python3 "$WHEEL" restore --wheel "$WHEEL" \
    --image "$(retry "IMDS ami-id" imds meta-data/ami-id)"; then
    RESTORED="$APP_DIR/venv/bin/python3"
    echo "${SPOT_SETUP_COMMAND:-}" >"$STATE_DIR/setup-done"
  fi
}

# It packs and uploads in the background, its lock (fd 9) closed: a large environment takes a while.
env_store() {
  [[ ! -f "$STATE_DIR/environment.json" ]] || env_run "$PYTHON" "$LIB_DIR" store --python "$PYTHON" --log "$LOG_FILE" 9>&-
}

# env_run PYTHON PYTHONPATH ARGS...: its one line into the log; its exit status.
env_run() {
  local rc=0
  PYTHONPATH="$2" "$1" -m spot_trainer.environment "${@:3}" --app-dir "$APP_DIR" --state-dir "$STATE_DIR" \
    >"$REASON" 2>&1 || rc=$?
  log "$(tail -n 1 "$REASON")"
  return "$rc"
}
