# shellcheck shell=bash
# What a failed bootstrap leaves behind: the job FAILED, its group at zero, the log in S3.

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
