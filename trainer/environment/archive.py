"""An environment as one archive: the venv and the runtime, packed from and unpacked into the app folder."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

PARTS = ("venv", "lib")  # the job's Python and the runtime installed beside it


def pack(app_dir: Path, archive: Path) -> int:
    """Bytes of the archive written; symlinks stay links (a venv's python points at its base). Level 1:
    torch's venv (761 MB) packs in 8 s to 236 MB, against 20 s to 206 MB at 6; both unpack in 5 s."""
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for part in PARTS:
            tar.add(app_dir / part, arcname=part)
    return archive.stat().st_size


def unpack(archive: Path, app_dir: Path) -> None:
    """Into place only once the whole archive has unpacked; raises on a damaged or foreign one."""
    staging = app_dir / ".environment-restore"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        # One pass over the stream, each member checked before it is written. "tar" keeps the venv's
        # absolute link to its base Python, which the "data" filter (Python 3.14's default) would refuse.
        options = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}  # 3.9 to 3.11.3: no filters
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                if member.name.split("/")[0] not in PARTS or ".." in Path(member.name).parts:
                    raise ValueError(f"the archive holds {member.name}, outside {' and '.join(PARTS)}")
                tar.extract(member, staging, **options)  # type: ignore[arg-type]
        if not (staging / "venv" / "bin" / "python3").is_symlink() and not (staging / "venv/bin/python3").exists():
            raise ValueError("the archive holds no venv/bin/python3")
        for part in PARTS:
            shutil.rmtree(app_dir / part, ignore_errors=True)
            (staging / part).rename(app_dir / part)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
