"""A local instance's view of its image's commands: a folder of links to this machine's /usr/bin, less
every Python the image does not have and every package manager but its own (played by
localcloud/bin/image-package-manager). A bootstrap that relied on this machine's python3.11 finds none.
Its plain `python3` is a real interpreter of the image's own version when this machine has one
(localcloud/interpreters.py), so what user data runs with it (the environment cache's restore, its
status record) runs under that version here as on the image; else this machine's.
"""

from __future__ import annotations

import re
from pathlib import Path

from localcloud.images import ImageFacts
from localcloud.interpreters import python_of_version

STAND_INS = Path(__file__).resolve().parent / "bin"
PACKAGE_MANAGERS = frozenset({"dnf", "yum", "apt-get", "apt"})
# python3.11, python3.12-config …: interpreters newer than the image's own python3 are not there.
VERSIONED_PYTHON = re.compile(r"^python3\.(\d+)")


def image_bin(facts: ImageFacts, folder: Path, *, aws_cli: Path) -> Path:
    """Fill `folder` with the image's commands and return it, to put on the instance's PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    own_minor = int(facts.python3.split(".")[1])
    own_python = python_of_version(facts.python3)
    for command in sorted(Path("/usr/bin").iterdir()):
        versioned = VERSIONED_PYTHON.match(command.name)
        if command.name in PACKAGE_MANAGERS or (versioned and int(versioned.group(1)) > own_minor):
            continue
        if own_python is not None and command.name in ("python3", f"python{facts.python3}"):
            continue
        (folder / command.name).symlink_to(command)
    if own_python is not None:
        for name in ("python3", f"python{facts.python3}"):
            (folder / name).symlink_to(own_python)
    # Both images ship the AWS CLI (AL2023 and the DLAMI have v2); this machine's is in the venv.
    (folder / "aws").symlink_to(aws_cli)
    (folder / facts.package_manager).symlink_to(STAND_INS / "image-package-manager")
    return folder
