#!/usr/bin/env bash
# Placeholder: the real bootstrap replaces this file.
set -Eeuo pipefail
echo "spot-trainer user data ${SPOT_USERDATA_VERSION:-unknown} for job ${SPOT_JOB:-unknown}"
