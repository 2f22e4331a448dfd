"""What decides a job's environment, as lines whose sha256 is its key in the cache."""

from __future__ import annotations

import hashlib
import shlex
import zipfile
from collections.abc import Iterator
from pathlib import Path

FORMAT = "environment 1"  # a change to what an archive holds makes every older one a miss


def requirement_files(setup: str) -> list[str]:
    """The files a setup command installs from (`-r FILE`, `--requirement FILE`, `--requirement=FILE`)."""
    try:
        words = shlex.split(setup)
    except ValueError:
        return []
    found = []
    for index, word in enumerate(words):
        if word in ("-r", "--requirement") and index + 1 < len(words):
            found.append(words[index + 1])
        elif word.startswith("--requirement="):
            found.append(word.partition("=")[2])
        elif word.startswith("-r") and len(word) > 2 and not word.startswith("--"):
            found.append(word[2:])
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _requirements_digest(code: Path | None, name: str) -> str:
    """The sha256 of a file of the job's code (its zip, as the stack ships it), or why there is none."""
    if code is None:
        return "missing"
    try:
        with zipfile.ZipFile(code) as archive:
            return hashlib.sha256(archive.read(name.removeprefix("./"))).hexdigest()
    except KeyError:
        return "missing"
    except (OSError, zipfile.BadZipFile):
        return "unreadable"


def key_lines(*, image: str, arch: str, runtime_wheel: Path, torch: str, setup: str, code: Path | None,
              userdata_version: str) -> Iterator[str]:
    yield f"{FORMAT}, user data {userdata_version}"
    yield f"image {image}"
    yield f"arch {arch}"
    yield f"runtime sha256 {sha256_of(runtime_wheel)}"
    yield f"torch {torch}"
    yield f"setup {setup}"
    for name in requirement_files(setup):
        yield f"requirements {name} {_requirements_digest(code, name)}"


def environment_key(lines: Iterator[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]
