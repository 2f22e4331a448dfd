"""`run.workdir`: a folder next to the job file, shipped whole to every instance.

A name that is not there is answered with the absolute path it was looked for at and the folders that
are there, the closest first, so a typo (`cnn-src` for `cnn_src`) is one edit away."""

from __future__ import annotations

import difflib
from pathlib import Path

from stacks.job.spec import field_error

SHOWN = 8  # folders named in the message; more are counted
CLOSE = 0.6  # difflib's default ratio: `cnn-src`/`cnn_src` and `src`/`srcs` pass


def check_workdir(workdir: str, job_file: Path) -> None:
    """JobSpecError when `workdir` is not a folder inside the job file's own folder."""
    if not workdir:
        return
    here = job_file.parent
    looked = (here / workdir).absolute()
    if not looked.is_dir():
        raise field_error("run.workdir", f"{workdir!r} is not a directory next to the job file: "
                          f"{looked} {'is a file' if looked.exists() else 'does not exist'}; {_folders_there(looked)}")
    if not looked.resolve().is_relative_to(here.resolve()):
        # The folder is shipped whole: one above the job file would take everything around it along.
        name = looked.resolve().name
        raise field_error("run.workdir", f"{workdir!r} lies outside the job file's folder, and all of it would be "
                          f"shipped: move your code to {here / name}/ and set workdir = \"{name}\"")


def _folders_there(looked: Path) -> str:
    """Which folders the parent of `looked` holds, the closest to the name first (hidden ones left out)."""
    parent = looked.parent
    if not parent.is_dir():
        return f"nor is there a folder {parent}"
    try:
        names = sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    except OSError:
        return f"{parent} cannot be listed"
    if not names:
        return f"{parent} holds no folder: put your code in one there and name it in workdir"
    close = difflib.get_close_matches(looked.name, names, n=len(names), cutoff=CLOSE)
    ordered = close + [name for name in names if name not in close]
    shown = ", ".join(ordered[:SHOWN]) + (f" and {len(ordered) - SHOWN} more" if len(ordered) > SHOWN else "")
    hint = f"did you mean workdir = \"{close[0]}\"? " if close else ""
    return f"{hint}the folders in {parent} are: {shown}"

