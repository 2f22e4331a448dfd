# shellcheck shell=bash
# log MESSAGE: one timestamped line, tagged with the running step, to stderr and the bootstrap log.

log() {
  local line
  line="$(date -u +%FT%TZ) spot-trainer-userdata[$STEP]: $*"
  echo "$line" >&2
  echo "$line" >>"$LOG_FILE"
}
