"""Real wheels made on the spot, for pip to install offline from a local folder (`--find-links`): a
package of a given name, version and size, as a job's requirements or a pinned torch would bring. A
local instance's pip installs from such a folder (PIP_FIND_LINKS, PIP_NO_INDEX) what it would fetch
from a package index on AWS: unpacking and installing cost what they cost, the download is local."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

DOWNLOAD_SECONDS = 1800  # torch's CPU wheel is 190 MB; from a package index that takes a while


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, *, payload_bytes: int = 0,
               requires: tuple[str, ...] = ()) -> Path:
    """`name-version-py3-none-any.whl` in `folder`: a module `name` that knows its version, with
    `payload_bytes` of incompressible data beside it (what a real package costs to unpack and pack)."""
    folder.mkdir(parents=True, exist_ok=True)
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n".encode(),
        f"{info}/METADATA": "\n".join(["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                                       *(f"Requires-Dist: {r}" for r in requires), ""]).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: spot-trainer-tests\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
    }
    if payload_bytes:
        files[f"{module}/payload.bin"] = os.urandom(payload_bytes)
    record = [_record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


# A typical requirements file's packages at their wheels' sizes (transformers, datasets, tokenizers,
# safetensors, accelerate, pyarrow, numpy, pandas and small dependencies, x86_64 wheels of 2026): 89 MB.
TYPICAL_REQUIREMENTS = (("transformers-like", 11_000_000), ("datasets-like", 5_000_000),
                        ("tokenizers-like", 3_000_000), ("safetensors-like", 500_000), ("accelerate-like", 350_000),
                        ("pyarrow-like", 40_000_000), ("numpy-like", 16_000_000), ("pandas-like", 12_000_000),
                        ("regex-like", 800_000), ("tqdm-like", 80_000), ("fsspec-like", 180_000),
                        ("huggingface-hub-like", 500_000))


def typical_requirements(folder: Path, fraction: float = 1.0) -> list[str]:
    """Wheels of TYPICAL_REQUIREMENTS at `fraction` of their sizes in `folder`; their pip specs."""
    for name, size in TYPICAL_REQUIREMENTS:
        make_wheel(folder, name, "1.0", payload_bytes=int(size * fraction))
    return [f"{name}==1.0" for name, _ in TYPICAL_REQUIREMENTS]


class WheelhouseError(RuntimeError):
    """pip could not download the requirements; str() is its last line."""


def wheelhouse(folder: Path, requirements: list[str]) -> Path:
    """`folder` holding the wheels of `requirements` and of their dependencies, downloaded by this
    machine's pip from the package sources it is configured with (an index, a local mirror); kept, so a
    later call with the same requirements downloads nothing. An instance installs from it offline
    (PIP_NO_INDEX, PIP_FIND_LINKS), as it would from an index on AWS, never from this machine's site-packages."""
    stamp, wanted = folder / "requirements.txt", "\n".join(requirements) + "\n"
    if stamp.is_file() and stamp.read_text() == wanted:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest",
                           str(folder), *requirements], capture_output=True, text=True, timeout=DOWNLOAD_SECONDS)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or ["pip download failed"]
        raise WheelhouseError(f"cannot download {' '.join(requirements)} into {folder}: {lines[-1]}")
    stamp.write_text(wanted)
    return folder
