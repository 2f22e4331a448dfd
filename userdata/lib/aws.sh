# shellcheck shell=bash
# The instance's metadata (IMDSv2) and S3 downloads.

# imds PATH: one IMDSv2 read (token PUT, then GET) below /latest/.
imds() {
  local token
  token="$("${CURL[@]}" -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 300" "${IMDS%/}/latest/api/token")" || return
  "${CURL[@]}" -H "X-aws-ec2-metadata-token: $token" "${IMDS%/}/latest/$1"
}

s3_get() { retry "download of $1" "$AWS_CLI" s3 cp --only-show-errors "$1" "$2"; }

instance_metadata() {
  INSTANCE_ID="$(retry "IMDS instance-id" imds meta-data/instance-id)"
  [[ -n "${SPOT_REGION:-}" ]] || SPOT_REGION="$(retry "IMDS region" imds meta-data/placement/region)"
  export SPOT_INSTANCE_ID="$INSTANCE_ID" SPOT_REGION AWS_DEFAULT_REGION="$SPOT_REGION"
  log "instance $INSTANCE_ID in $SPOT_REGION"
}
