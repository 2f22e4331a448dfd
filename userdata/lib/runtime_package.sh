# shellcheck shell=bash disable=SC2034  # globals shared by the parts of the rendered script
# The Spot Trainer runtime (spot_trainer), installed beside the Python env.

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
