# shellcheck shell=bash disable=SC2034  # globals shared by the parts of the rendered script
# Where everything lives, and what the environment may override (tests, the local cloud).

SPOT_ROOT="${SPOT_ROOT:-}"
SYSTEMCTL="${SYSTEMCTL:-systemctl}"
AWS_CLI="${SPOT_AWS_CLI:-aws}"
IMDS="${AWS_EC2_METADATA_SERVICE_ENDPOINT:-http://169.254.169.254}"
# The PyTorch DLAMIs' env (their release notes' python_location), then older DLAMIs' conda env.
PYTHONS="${SPOT_PYTHON_CANDIDATES:-/opt/pytorch/bin/python /opt/conda/envs/pytorch/bin/python3}"
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
