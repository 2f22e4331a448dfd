"""Jobs around scripts as people write them (tests/fixtures/plain_scripts): the script shipped as the job's
code, run unmodified with the job's defaults. Each script keeps its current step in WHERE, a file of its
working directory the agent never reads: the view of where a killed instance was."""

from __future__ import annotations

import shutil
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures/plain_scripts"
WHERE = "where.txt"
JOB = """\
description = "a plain script, unmodified"
[run]
command = "python {file} {arguments}"
workdir = "code"
grace_seconds = 30
[capacity]
instance_types = ["c7i.xlarge"]
"""


def plain_job(folder: Path, file: str, arguments: str) -> Path:
    """The job file of `file` run with `arguments`, its code beside it; returns the job file."""
    (folder / "code").mkdir(parents=True)
    shutil.copy(SCRIPTS / file, folder / "code" / file)
    job = folder / "plain.toml"
    job.write_text(JOB.format(file=file, arguments=arguments))
    return job


def where_it_was(instance_root: Path) -> int | None:
    """The step the script last kept on an instance's disk (its working directory is below the root)."""
    found = sorted(instance_root.rglob(WHERE))
    return int(found[0].read_text()) if found else None
