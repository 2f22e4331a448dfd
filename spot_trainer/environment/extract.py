"""An archive unpacked as its bytes arrive, each byte hashed on its way, into a staging folder only: by
GNU tar and gzip where the image has them (decompressing and writing in two processes of their own,
beside the one that hashes), else by tarfile. Either reads the stream to its end, so the digest is the
whole archive's even when unpacking stopped early: the caller decides what to trust once it has both."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from .archive import outside_parts
from .remote import CALL_SECONDS

BLOCK = 1 << 20
TAR_EXIT_SECONDS = 600  # from the archive's last byte to tar's exit: the rest of a large venv written
UNPACK_SECONDS = CALL_SECONDS + TAR_EXIT_SECONDS  # the whole unpack: a tar stalled mid-stream is ended
# Member names are GNU tar's to refuse (`..`) or strip (a leading `/`, which put_in_place then refuses);
# a link pointing outside waits as a plain file until the end, so no member is written through it.
# Files are the instance's user's, with its umask: no set-id bits or foreign owners from an archive.
GNU_TAR_OPTIONS = ("--no-same-owner", "--no-same-permissions")


@dataclass(frozen=True)
class Passed:
    """What went through: the stream's sha256, why it did not unpack (or ""), and when each part ended."""

    sha256: str
    error: str
    tool: str
    downloaded_s: float
    unpacked_s: float


def gnu_tar() -> str | None:
    """The image's GNU tar, when it has it and gzip (its `-z`); another tar's rules for names are not
    GNU tar's, so it is not taken."""
    tar = shutil.which("tar")
    if tar is None or shutil.which("gzip") is None:
        return None
    try:
        version = subprocess.run([tar, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tar if version.startswith("tar (GNU tar)") else None


def extract(source: IO[bytes], staging: Path, *, tar: str | None) -> Passed:
    """Unpack `source` into `staging` with GNU tar at path `tar`, or tarfile when None."""
    started, digest = time.monotonic(), hashlib.sha256()
    if tar is not None:
        error, downloaded = _with_gnu_tar(tar, source, staging, digest, started)
    else:
        error, downloaded = _with_tarfile(source, staging, digest, started)
    return Passed(digest.hexdigest(), error, "GNU tar" if tar else "tarfile", downloaded,
                  time.monotonic() - started)


def _with_gnu_tar(tar: str, source: IO[bytes], staging: Path, digest: Any, started: float) -> tuple[str, float]:
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen([tar, "-xzf", "-", "-C", str(staging), *GNU_TAR_OPTIONS],
                                   stdin=subprocess.PIPE, stderr=errors)
        assert process.stdin is not None
        stalled = threading.Event()

        def end_stalled() -> None:  # tar blocked mid-stream (a hung disk): its pipe breaks, hashing goes on
            stalled.set()
            process.kill()

        watchdog = threading.Timer(UNPACK_SECONDS, end_stalled)
        watchdog.start()
        try:
            for block in iter(lambda: source.read(BLOCK), b""):
                digest.update(block)
                if not process.stdin.closed:
                    try:
                        process.stdin.write(block)
                    except BrokenPipeError:  # tar stopped: the rest is still hashed
                        _close(process.stdin)
            downloaded = time.monotonic() - started
            _close(process.stdin)
            process.wait(timeout=TAR_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            _stop(process)
            return f"tar did not finish {TAR_EXIT_SECONDS}s after the archive's last byte", downloaded
        except BaseException:
            _stop(process)
            raise
        finally:
            watchdog.cancel()
        errors.seek(0)
        said = [line for line in errors.read().decode(errors="replace").splitlines()  # gzip's start blank
                if line.strip() and "Removing leading" not in line and "Exiting with failure status" not in line]
    if stalled.is_set():
        return f"tar did not finish within {UNPACK_SECONDS}s", downloaded
    if process.returncode != 0:
        return (said[0] if said else f"tar exited with {process.returncode}"), downloaded
    return "", downloaded


def _close(pipe: IO[bytes]) -> None:
    """Closed, even where tar has gone and the last buffered bytes cannot be flushed to it."""
    with contextlib.suppress(BrokenPipeError):
        pipe.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()


class _Hashing:
    """A reader that hashes what passes through it."""

    def __init__(self, source: IO[bytes], digest: Any) -> None:
        self.source, self.digest = source, digest

    def read(self, size: int = -1) -> bytes:
        block = self.source.read(size)
        self.digest.update(block)
        return block


def _with_tarfile(source: IO[bytes], staging: Path, digest: Any, started: float) -> tuple[str, float]:
    reader = _Hashing(source, digest)
    error = ""
    try:
        _tarfile_unpack(reader, staging)
    except (OSError, ValueError, EOFError, tarfile.TarError, zlib.error) as failed:
        error = str(failed) or type(failed).__name__
    for _ in iter(lambda: reader.read(BLOCK), b""):  # the archive's end, or what is left after a failure
        pass
    return error, time.monotonic() - started


def _tarfile_unpack(reader: _Hashing, staging: Path) -> None:
    # "tar" keeps the venv's absolute link to its base Python, which the "data" filter (Python 3.14's
    # default) would refuse; Pythons before 3.9.17 have no filters. Links are made last, as GNU tar
    # does with those that point away, so that no member is ever written through one.
    options = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
    links: dict[PurePosixPath, tarfile.TarInfo] = {}
    with tarfile.open(fileobj=reader, mode="r|gz") as tar:  # type: ignore[call-overload]
        for member in tar:
            name = PurePosixPath(member.name)
            reason = outside_parts(member.name) or (outside_parts(member.linkname) if member.islnk() else None)
            through = next((link for link in name.parents if link in links), None)
            if reason or through:
                raise ValueError(reason or f"the archive holds {member.name}, under its link {through}")
            if member.issym() or member.islnk():
                links[name] = member
            else:
                tar.extract(member, staging, **options)
        for member in links.values():
            tar.extract(member, staging, **options)
