# shellcheck shell=bash
# The agent under systemd, (re)started only when something changed.

agent_service() {
  if "$SYSTEMCTL" is-active --quiet "$UNIT" && ((CHANGED == 0)); then
    log "agent already running and unchanged; nothing to do"
    return 0
  fi
  "$SYSTEMCTL" daemon-reload 9>&-
  "$SYSTEMCTL" enable "$UNIT" 9>&-
  # restart: a running agent with changed settings gets SIGTERM (checkpoint) and comes back.
  "$SYSTEMCTL" restart "$UNIT" 9>&-
  log "agent started: $PYTHON -P -m spot_trainer agent --env-file $ENV_FILE"
}
