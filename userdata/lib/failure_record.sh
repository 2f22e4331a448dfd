# shellcheck shell=bash
# What a failed bootstrap leaves behind: the job FAILED, its group at zero, the log in S3.

# FAILED in the local status file and in S3's status.json, merged so the job's counters stay.
report_failure() {
  local status="$STATE_DIR/bootstrap-status.json" prefix="s3://${SPOT_BUCKET:-}/${SPOT_JOB:-}"
  rm -f "$status"
  [[ -z "${SPOT_BUCKET:-}" ]] || "$AWS_CLI" s3 cp --only-show-errors "$prefix/status.json" "$status" 2>/dev/null
  failed_record "$status" "$STEP" "$1" "$2" "$INSTANCE_ID" "${SPOT_JOB:-}" || log "cannot write $status"
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

# failed_record FILE STEP REASON EXIT_CODE INSTANCE JOB: FAILED over FILE as the agent records it, by the
# runtime's own code once it is installed; before that, the same fields here (a test holds them equal).
failed_record() {
  [[ -n "${PYTHON:-}" && -f "$LIB_DIR/spot_trainer/agent/failed_record.py" ]] &&
    PYTHONPATH="$LIB_DIR" "$PYTHON" -P -m spot_trainer.agent.failed_record "$@" && return
  python3 - "$@" <<'PY'
import json, sys, time
path, step, reason, rc, instance, job = sys.argv[1:]
try:
    old = json.load(open(path))
except (OSError, ValueError):
    old = {}
count = lambda name: int(old.get(name) or 0)
json.dump(dict(job=job, state="FAILED", step=old.get("step"), loss=None, samples_per_s=None,
               checkpoint_step=old.get("checkpoint_step"), instance=instance, attempt=count("attempt"),
               interruptions=count("interruptions"), failures=count("failures") + 1,
               reason=f"bootstrap step {step}: {reason}", warning="",
               first_started_at=old.get("first_started_at") or time.time(), deadline_at=None, total_steps=None,
               margin_seconds=None, budget_usd=None, seconds_per_step=None,
               updated_at=time.strftime("%FT%T+00:00", time.gmtime()), bootstrap={"step": step, "exit_code": int(rc)}),
          open(path, "w"))
PY
}
