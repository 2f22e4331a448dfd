"""A venv over the image's PyTorch env: its own packages first, then the image's, so what the job's
setup installs lands apart from the image's env and can be cached without it. The image's env may be a
venv itself, which `--system-site-packages` would skip: its site folders come in through a .pth."""

from __future__ import annotations

import site
import sysconfig
import venv
from pathlib import Path

PIP_SHIM = '#!/bin/sh\nexec "$(dirname "$0")/python3" -m pip "$@"\n'


def make_overlay(target: Path) -> None:
    """Run by the image's env's interpreter: a venv at `target` that sees its packages (pip included)."""
    venv.create(target, with_pip=False, clear=True, symlinks=True)
    version = sysconfig.get_python_version()
    lines = [f"import site; site.addsitedir({folder!r})" for folder in site.getsitepackages()]
    (target / "lib" / f"python{version}" / "site-packages" / "image-env.pth").write_text("\n".join(lines) + "\n")
    pip = target / "bin" / "pip"
    pip.write_text(PIP_SHIM)
    pip.chmod(0o755)
