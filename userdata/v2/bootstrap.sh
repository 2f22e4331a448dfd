#!/usr/bin/env bash
# Spot Trainer user data v2: Python env, runtime, job code, agent under systemd; reruns are safe. Paths,
# endpoints, commands: env overrides. v2: runtime = spot_trainer, run with -P so no job file shadows it.
# Rendered after the shared parts of userdata/lib/ that stacks/instance/userdata_versions.py lists for v2.
# shellcheck disable=SC2034  # globals shared by the parts of the rendered script
set -Eeuo pipefail

main() {
  mkdir -p "${LOG_FILE%/*}" "$STATE_DIR" "$APP_DIR"
  log "Spot Trainer user data ${SPOT_USERDATA_VERSION:-?} for job ${SPOT_JOB:-?} (stack ${SPOT_STACK:-?})"
  trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR
  [[ -z "${SPOT_REGION:-}" ]] || export AWS_DEFAULT_REGION="$SPOT_REGION"
  WORKDIR="$SPOT_ROOT${SPOT_WORKDIR:-$DEFAULT_SPOT_WORKDIR}"
  local name
  for name in check_header instance_metadata env_restore python_env trainer_package job_code setup_command \
    env_store agent_config agent_service; do
    step "${name//_/-}" "$name"
  done
  echo "{\"state\": \"AGENT_STARTED\", \"instance_id\": \"$INSTANCE_ID\"}" >"$STATE_DIR/bootstrap-status.json"
  STEP=finished
  log "bootstrap finished in ${SECONDS}s"
}

main "$@"
