# shellcheck shell=bash
# The header's variables, checked before anything is installed.

check_header() {
  local name
  for name in SPOT_USERDATA_VERSION SPOT_JOB SPOT_BUCKET SPOT_COMMAND SPOT_TRAINER_PACKAGE; do
    [[ -n "${!name:-}" ]] || fail "header variable $name is missing or empty"
  done
  [[ "${SPOT_GRACE_SECONDS:=$DEFAULT_SPOT_GRACE_SECONDS}" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    fail "SPOT_GRACE_SECONDS='$SPOT_GRACE_SECONDS' is not a number of seconds"
  [[ ! "$SPOT_ROOT$WORKDIR" =~ [[:space:]] ]] || fail "SPOT_ROOT and SPOT_WORKDIR must not contain spaces"
  exec 9>"$STATE_DIR/bootstrap.lock"  # held until exit; closed for the commands that start services
  flock -w 600 9 || fail "another bootstrap still holds $STATE_DIR/bootstrap.lock"
}
