# shellcheck shell=bash
# Calls that may fail for a moment (S3, IMDS, package indexes) get bounded retries.

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
