#!/usr/bin/env bash
# Spot Trainer user data v2: Python env, runtime, job code, agent under systemd; reruns are safe. Paths,
# endpoints, commands: env overrides. v2: runtime = spot_trainer, run with -P so no job file shadows it.
set -Eeuo pipefail

SPOT_ROOT="${SPOT_ROOT:-}"
SYSTEMCTL="${SYSTEMCTL:-systemctl}"
AWS_CLI="${SPOT_AWS_CLI:-aws}"
IMDS="${AWS_EC2_METADATA_SERVICE_ENDPOINT:-http://169.254.169.254}"
PYTHONS="${SPOT_PYTHON_CANDIDATES:-/opt/pytorch/bin/python3 /opt/conda/envs/pytorch/bin/python3}"
RETRY_ATTEMPTS="${SPOT_RETRY_ATTEMPTS:-5}"
RETRY_BASE_MS="${SPOT_RETRY_BASE_MS:-1000}"
RETRY_MAX_MS="${SPOT_RETRY_MAX_MS:-30000}"
CURL=(curl --fail --silent --show-error --connect-timeout "${SPOT_CURL_CONNECT_TIMEOUT:-2}"
  --max-time "${SPOT_CURL_MAX_TIME:-10}")
UNIT=spot-trainer-agent.service
APP_DIR="$SPOT_ROOT/opt/spot-trainer"
LIB_DIR="$APP_DIR/lib"
STATE_DIR="$SPOT_ROOT/var/lib/spot-trainer"
LOG_FILE="$SPOT_ROOT/var/log/spot-trainer/bootstrap.log"
ENV_FILE="$SPOT_ROOT/etc/spot-trainer/agent.env"
UNIT_FILE="$SPOT_ROOT/etc/systemd/system/$UNIT"
REASON="$STATE_DIR/failure-reason"
STEP=start
INSTANCE_ID=unknown
CHANGED=0
TORCH_ON_311='import sys, importlib.metadata as m; assert sys.version_info >= (3, 11); print(m.version("torch"))'

log() {
  local line
  line="$(date -u +%FT%TZ) spot-trainer-userdata[$STEP]: $*"
  echo "$line" >&2
  echo "$line" >>"$LOG_FILE"
}

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

# FAILED in the local status file and in S3's status.json, merged so the job's counters stay.
report_failure() {
  local status="$STATE_DIR/bootstrap-status.json" prefix="s3://${SPOT_BUCKET:-}/${SPOT_JOB:-}"
  rm -f "$status"
  [[ -z "${SPOT_BUCKET:-}" ]] || "$AWS_CLI" s3 cp --only-show-errors "$prefix/status.json" "$status" 2>/dev/null
  python3 - "$status" "$STEP" "$1" "$2" "$INSTANCE_ID" "${SPOT_JOB:-}" <<'PY' || log "cannot write $status"
import json, sys, time
path, step, reason, rc, instance, job = sys.argv[1:]
try:
    record = json.load(open(path))
except (OSError, ValueError):
    record = {}
record.update(job=job, state="FAILED", instance=instance, reason=f"bootstrap step {step}: {reason}",
              updated_at=time.strftime("%FT%T+00:00", time.gmtime()), bootstrap={"step": step, "exit_code": int(rc)})
json.dump(record, open(path, "w"))
PY
  # Every replacement would boot into the same failure: stop paying for the job.
  if [[ -n "${SPOT_ASG_NAME:-}" ]] && RETRY_ATTEMPTS=2 retry "scale to 0" "$AWS_CLI" autoscaling \
    set-desired-capacity --auto-scaling-group-name "$SPOT_ASG_NAME" --desired-capacity 0; then
    log "set desired capacity of $SPOT_ASG_NAME to 0"
  fi
  [[ -n "${SPOT_BUCKET:-}" ]] || return 0
  RETRY_ATTEMPTS=2 retry "log upload" "$AWS_CLI" s3 cp --only-show-errors "$LOG_FILE" "$prefix/bootstrap/$INSTANCE_ID.log"
  if RETRY_ATTEMPTS=2 retry "status upload" "$AWS_CLI" s3 cp --only-show-errors "$status" "$prefix/status.json"; then
    log "FAILED recorded in $prefix/status.json"
  else
    log "cannot record FAILED in $prefix/status.json: $(cat "$REASON")"
  fi
}

# retry WHAT COMMAND...: bounded attempts, exponential backoff with jitter; stdout passes through.
retry() {
  local what="$1" attempt=1 ms rc errors
  shift
  errors="$(mktemp)"
  until "$@" 2>"$errors"; do
    rc=$?
    if ((attempt >= RETRY_ATTEMPTS)); then
      echo "$what failed after $attempt attempts: $(tail -n 1 "$errors")" >"$REASON"
      rm -f "$errors"
      return "$rc"
    fi
    ms=$((RETRY_BASE_MS << (attempt - 1)))
    ((ms <= RETRY_MAX_MS)) || ms=$RETRY_MAX_MS
    ms=$((ms / 2 + RANDOM % (ms / 2 + 1)))
    log "$what: attempt $attempt/$RETRY_ATTEMPTS failed (exit $rc): $(tail -n 1 "$errors"); next in ${ms}ms"
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    attempt=$((attempt + 1))
  done
  rm -f "$errors"
}

# imds PATH: one IMDSv2 read (token PUT, then GET) below /latest/.
imds() {
  local token
  token="$("${CURL[@]}" -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 300" "${IMDS%/}/latest/api/token")" || return
  "${CURL[@]}" -H "X-aws-ec2-metadata-token: $token" "${IMDS%/}/latest/$1"
}

s3_get() { retry "download of $1" "$AWS_CLI" s3 cp --only-show-errors "$1" "$2"; }

check_header() {
  local name
  for name in SPOT_USERDATA_VERSION SPOT_JOB SPOT_BUCKET SPOT_COMMAND SPOT_TRAINER_PACKAGE; do
    [[ -n "${!name:-}" ]] || fail "header variable $name is missing or empty"
  done
  [[ "${SPOT_GRACE_SECONDS:=110}" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    fail "SPOT_GRACE_SECONDS='$SPOT_GRACE_SECONDS' is not a number of seconds"
  [[ ! "$SPOT_ROOT$WORKDIR" =~ [[:space:]] ]] || fail "SPOT_ROOT and SPOT_WORKDIR must not contain spaces"
  exec 9>"$STATE_DIR/bootstrap.lock"  # held until exit; closed for the commands that start services
  flock -w 600 9 || fail "another bootstrap still holds $STATE_DIR/bootstrap.lock"
}

instance_metadata() {
  INSTANCE_ID="$(retry "IMDS instance-id" imds meta-data/instance-id)"
  [[ -n "${SPOT_REGION:-}" ]] || SPOT_REGION="$(retry "IMDS region" imds meta-data/placement/region)"
  export SPOT_INSTANCE_ID="$INSTANCE_ID" SPOT_REGION AWS_DEFAULT_REGION="$SPOT_REGION"
  log "instance $INSTANCE_ID in $SPOT_REGION"
}

# The DLAMI's PyTorch env when present, else a venv with torch (CUDA build on a GPU host); Python >= 3.11.
python_env() {
  local candidate version gpus index=() base
  for candidate in ${SPOT_BASE_PYTHON:-$PYTHONS} "$APP_DIR/venv/bin/python3"; do
    if version="$("$candidate" -c "$TORCH_ON_311" 2>/dev/null)"; then
      PYTHON="$candidate"
      log "python $PYTHON with torch $version"
      return 0
    fi
    [[ -z "${SPOT_BASE_PYTHON:-}" ]] || fail "SPOT_BASE_PYTHON=$SPOT_BASE_PYTHON is not Python >= 3.11 with torch"
  done
  base="$(newest_python)" || base="$(install_python)" || return 1
  PYTHON="$APP_DIR/venv/bin/python3"
  if gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"; then
    log "GPUs: ${gpus//$'\n'/, }"
  else
    index=(--index-url https://download.pytorch.org/whl/cpu)
  fi
  log "no PyTorch env found; installing ${SPOT_TORCH_SPEC:=torch==2.13.0} into $APP_DIR/venv"
  "$base" -m venv "$APP_DIR/venv"
  retry "install of $SPOT_TORCH_SPEC" "$PYTHON" -m pip install -q "${index[@]}" "$SPOT_TORCH_SPEC"
}

newest_python() {
  local base
  for base in python3.13 python3.12 python3.11; do
    command -v "$base" >/dev/null && echo "$base" && return 0
  done
  return 1
}

# The image's own python3 is older than the runtime needs (Amazon Linux 2023: 3.9, Ubuntu 22.04 and the
# base DLAMI: 3.10); both ship python3.11 as an optional package of their package manager.
install_python() {
  if command -v dnf >/dev/null; then
    log "no python3.11 or newer on this image; installing python3.11 with dnf"
    retry "dnf install of python3.11" dnf install -y -q python3.11 >&2 || return 1
  elif command -v apt-get >/dev/null; then
    log "no python3.11 or newer on this image; installing python3.11 with apt-get"
    retry "apt-get update" apt-get update -q >&2 || return 1
    retry "apt-get install of python3.11" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q python3.11 python3.11-venv >&2 || return 1
  else
    fail "no python3.11 or newer on this image, and neither dnf nor apt-get to install one"
    return 1
  fi
  newest_python || fail "the package manager installed no python3.11 on this image"
}

# wheel_name FILE: the name pip needs, from the archive (asset keys are content hashes).
wheel_name() {
  "$PYTHON" - "$1" 2>/dev/null <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
info = next(n.split("/")[0] for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
tag = [t[4:].strip() for t in z.read(info + "/WHEEL").decode().splitlines() if t.startswith("Tag:")][0]
print(info[:-10] + "-" + tag + ".whl")
PY
}

# Into its own directory on PYTHONPATH: the base env and its torch stay untouched.
trainer_package() {
  local source="$SPOT_TRAINER_PACKAGE" target="$SPOT_TRAINER_PACKAGE" tmp pip_args=()
  if [[ -d "$LIB_DIR/spot_trainer" && "$(cat "$LIB_DIR/.installed-from" 2>/dev/null)" == "$source" ]]; then
    log "$(cd "$LIB_DIR" && echo spot_trainer-*.dist-info) already installed from $source"
    return 0
  fi
  tmp="$(mktemp -d)"
  if [[ "$source" == s3://* ]]; then
    s3_get "$source" "$tmp/package"
    target="$tmp/$(wheel_name "$tmp/package")" || fail "$source is not a wheel (no .dist-info/WHEEL inside)"
    mv "$tmp/package" "$target"
  fi
  read -ra pip_args <<<"${SPOT_PIP_ARGS:-}"
  rm -rf "$LIB_DIR.new"
  retry "pip install of $source" "$PYTHON" -m pip install -q --disable-pip-version-check --no-input \
    --target "$LIB_DIR.new" "${pip_args[@]}" "$target"
  [[ -f "$LIB_DIR.new/spot_trainer/__main__.py" ]] ||
    fail "$source does not install the spot_trainer package (user data v2 needs spot-trainer >= 0.2)"
  echo "$source" >"$LIB_DIR.new/.installed-from"
  rm -rf "$LIB_DIR" "$tmp"
  mv "$LIB_DIR.new" "$LIB_DIR"
  CHANGED=1
  log "installed $(cd "$LIB_DIR" && echo spot_trainer-*.dist-info) into $LIB_DIR"
}

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
  local checkpoints="${SPOT_CHECKPOINT_DIR:-/opt/spot-trainer/checkpoints}"
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
TimeoutStopSec=$((10#${SPOT_GRACE_SECONDS%.*} + 31))
StandardOutput=journal
StandardError=journal
SyslogIdentifier=spot-trainer-agent

[Install]
WantedBy=multi-user.target
EOF
  install_file "$UNIT_FILE.new" "$UNIT_FILE"
}

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

main() {
  mkdir -p "${LOG_FILE%/*}" "$STATE_DIR" "$APP_DIR"
  log "Spot Trainer user data ${SPOT_USERDATA_VERSION:-?} for job ${SPOT_JOB:-?} (stack ${SPOT_STACK:-?})"
  trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR
  [[ -z "${SPOT_REGION:-}" ]] || export AWS_DEFAULT_REGION="$SPOT_REGION"
  WORKDIR="$SPOT_ROOT${SPOT_WORKDIR:-/opt/spot-trainer/work}"
  local name
  for name in check_header instance_metadata python_env trainer_package job_code setup_command \
    agent_config agent_service; do
    step "${name//_/-}" "$name"
  done
  echo "{\"state\": \"AGENT_STARTED\", \"instance_id\": \"$INSTANCE_ID\"}" >"$STATE_DIR/bootstrap-status.json"
  STEP=finished
  log "bootstrap finished in ${SECONDS}s"
}

main "$@"
