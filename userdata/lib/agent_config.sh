# shellcheck shell=bash disable=SC2034  # globals shared by the parts of the rendered script
# The agent's settings file and its systemd unit, rewritten only when they change.

# KEY="VALUE" as systemd's EnvironmentFile reads it: only \\ and \" escaped, no expansion of $.
env_line() {
  local value="$2"
  [[ "$value" != *$'\n'* ]] || fail "$1 must be a single line"
  value="${value//\\/\\\\}"
  printf '%s="%s"\n' "$1" "${value//\"/\\\"}"
}

install_file() {
  if [[ -f "$2" && "$(cat "$1")" == "$(cat "$2")" ]]; then
    rm "$1"
  else
    mv "$1" "$2"
    CHANGED=1
  fi
}

agent_config() {
  local name
  local checkpoints="${SPOT_CHECKPOINT_DIR:-$DEFAULT_SPOT_CHECKPOINT_DIR}"
  # A relative folder is where the job's script saves from its working directory (run.checkpoint_dir).
  if [[ "$checkpoints" == /* ]]; then checkpoints="$SPOT_ROOT$checkpoints"; else checkpoints="$WORKDIR/$checkpoints"; fi
  export SPOT_WORKDIR="$WORKDIR" SPOT_CHECKPOINT_DIR="$checkpoints"
  mkdir -p "$SPOT_CHECKPOINT_DIR" "${ENV_FILE%/*}" "${UNIT_FILE%/*}"
  {
    echo "# Spot Trainer agent settings, written by user data $SPOT_USERDATA_VERSION"
    # SPOT_* settings: the agent reads its own (config.py ENV_NAMES) and ignores the rest.
    for name in "${!SPOT_@}" AWS_ENDPOINT_URL AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_DEFAULT_REGION; do
      [[ -z "${!name:-}" || "$name" == SPOT_SETUP_COMMAND ]] || env_line "$name" "${!name}"
    done
    env_line SPOT_BOOTSTRAP_LOG "$LOG_FILE"
    env_line PYTHONPATH "$LIB_DIR"
  } >"$ENV_FILE.new"
  chmod 600 "$ENV_FILE.new"
  install_file "$ENV_FILE.new" "$ENV_FILE"
  cat >"$UNIT_FILE.new" <<EOF
[Unit]
Description=Spot Trainer agent for job $SPOT_JOB
Wants=network-online.target
After=network-online.target

[Service]
EnvironmentFile=$ENV_FILE
Environment=PATH=${PYTHON%/*}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The agent starts the command in the workdir itself.
WorkingDirectory=$STATE_DIR
ExecStart=$PYTHON -P -m spot_trainer agent --env-file $ENV_FILE
Restart=on-failure
# 2: bad settings, 3: the job FAILED for good; a restart would not help.
RestartPreventExitStatus=2 3
RestartSec=${SPOT_RESTART_SEC:-10}
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec=$((10#${SPOT_GRACE_SECONDS%.*} + STOP_TIMEOUT_ALLOWANCE_SECONDS))
StandardOutput=journal
StandardError=journal
SyslogIdentifier=spot-trainer-agent

[Install]
WantedBy=multi-user.target
EOF
  install_file "$UNIT_FILE.new" "$UNIT_FILE"
}
