"""A real interpreter of a given Python version on this machine, when it has one: what an image's own
`python3` is (3.9 on Amazon Linux 2023, 3.10 on the base DLAMI), so the code user data runs with it runs
under that version here too. Looked up on the PATH and in pyenv's versions; each candidate is asked its
own version and its real executable (a pyenv shim is a script that only works with the caller's HOME)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

ASK = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"


def _candidates(version: str) -> list[str]:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)  # the newest patch first
    on_path = shutil.which(f"python{version}")
    return [str(path) for path in found] + ([on_path] if on_path else [])


@functools.cache
def python_of_version(version: str) -> Path | None:
    """This machine's interpreter of `version` ("3.9"), resolved to its executable; None when none runs."""
    for candidate in _candidates(version):
        try:
            answer = subprocess.run([candidate, "-c", ASK], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = answer.stdout.split()
        if answer.returncode == 0 and len(lines) == 2 and lines[0] == version:
            return Path(lines[1])
    return None
