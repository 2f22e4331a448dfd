"""The runtime every instance installs: a wheel of this checkout's spot_trainer/, built at synth and shipped
with the stack as a content-addressed asset (as `run.workdir` is), so a first deploy needs no package
index and no name on it that someone else could register.

The wheel is rebuilt only when the package's sources change. Several processes may ask at once (two
synths, test workers, the local spot cloud): pip builds in the checkout's own build/ folder, so one
build runs at a time, from nothing an earlier build staged there, and a wheel appears in the cache only
whole (built aside, then renamed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
WHEEL_CACHE = REPO_ROOT / "build" / "runtime-wheels"


class WheelError(RuntimeError):
    """pip could not build the runtime's wheel; the message is pip's last line."""


def sources_digest() -> str:
    """What the wheel is made of: every module of the package and the project file."""
    sources = sorted((REPO_ROOT / "spot_trainer").rglob("*.py")) + [REPO_ROOT / "pyproject.toml"]
    named = (str(p.relative_to(REPO_ROOT)).encode() + p.read_bytes() for p in sources)
    return hashlib.sha256(b"".join(named)).hexdigest()[:16]


def runtime_wheel(cache: Path = WHEEL_CACHE) -> Path:
    """`pip wheel` of this checkout, from the cache when its sources have not changed."""
    digest = sources_digest()
    directory = cache / digest
    cache.mkdir(parents=True, exist_ok=True)
    with build_lock():
        if built := sorted(directory.glob("spot_trainer-*.whl")):
            return built[0]
        building = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=cache))
        forget_earlier_builds()
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(building),
             str(REPO_ROOT)], capture_output=True, text=True, cwd=building)
        if result.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            raise WheelError(f"cannot build the runtime wheel: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
        shutil.rmtree(directory, ignore_errors=True)  # an empty folder a killed build of old left behind
        building.rename(directory)
        return next(directory.glob("spot_trainer-*.whl"))


@contextlib.contextmanager
def build_lock(root: Path = REPO_ROOT) -> Iterator[None]:
    """The checkout's build/ folder, one build at a time whichever cache it fills; released when the file
    closes, or the process dies."""
    (root / "build").mkdir(exist_ok=True)
    with open(root / "build" / ".runtime-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def forget_earlier_builds(root: Path = REPO_ROOT) -> None:
    """setuptools stages a wheel's files in build/lib and never deletes one there: a module since moved or
    removed would ship on every instance beside its successor. Each build starts from none."""
    for staged in (root / "build" / "lib", *(root / "build").glob("bdist.*")):
        shutil.rmtree(staged, ignore_errors=True)
