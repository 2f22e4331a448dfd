# shellcheck shell=bash
# A Python >= 3.11 with torch for the runtime and the job.

# ... and its torch satisfies run.torch (pip's own version rules; any torch when the job pins none).
TORCH_ON_311='import sys, importlib.metadata as m; assert sys.version_info >= (3, 11); v = m.version("torch")
if sys.argv[1][5:]: from pip._vendor.packaging.specifiers import SpecifierSet as S; assert v in S(sys.argv[1][5:])
print(v)'

# The DLAMI's PyTorch env when present, else a venv with torch (CUDA build on a GPU host); Python >= 3.11.
python_env() {
  local candidate version gpus index=() base
  for candidate in ${RESTORED:-} ${SPOT_BASE_PYTHON:-$PYTHONS} "$APP_DIR/venv/bin/python3"; do
    if version="$("$candidate" -c "$TORCH_ON_311" "${SPOT_TORCH_SPEC:-torch}" 2>/dev/null)"; then
      PYTHON="$candidate"
      log "python $PYTHON with torch $version"
      # What setup installs, the env cache keeps: in a venv of its own, not in the image's env.
      if [[ -f "$STATE_DIR/environment.json" && -n "${SPOT_SETUP_COMMAND:-}" && "$PYTHON" != "$APP_DIR"/venv/* ]]; then
        env_run "$PYTHON" "$WHEEL" overlay
        PYTHON="$APP_DIR/venv/bin/python3"
      fi
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
  log "no PyTorch env that fits; installing ${SPOT_TORCH_SPEC:=torch==2.13.0} into $APP_DIR/venv"
  "$base" -m venv "$APP_DIR/venv"
  # numpy with it, as the DLAMI's PyTorch env has it: torch's wheel does not bring it, the built-in trainer needs it.
  retry "install of $SPOT_TORCH_SPEC" "$PYTHON" -m pip install -q "${index[@]}" "$SPOT_TORCH_SPEC" \
    "$(numpy_for "$SPOT_TORCH_SPEC")"
}

# torch before 2.3 was built against NumPy 1: NumPy 2 breaks its numpy interop (pytorch/pytorch#107302).
numpy_for() {
  if [[ "$1" =~ ==([0-9]+)\.([0-9]+) ]] && ((BASH_REMATCH[1] * 100 + BASH_REMATCH[2] < 203)); then
    echo 'numpy<2'
  else
    echo numpy
  fi
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
