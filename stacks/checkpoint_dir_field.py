"""run.checkpoint_dir: the folder a user's own script already saves into, so the script needs no change.

The agent watches, uploads from and restores into this folder instead of its own default. A relative
path is taken from the command's working directory (where `run.workdir` is unpacked), which is where a
script's `output_dir="outputs"` lands."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from stacks.job_spec import RunSpec, field_error

MAX_LENGTH = 200
# One word in the agent's environment file and in bootstrap's paths: no spaces, no shell or quote characters.
_SAFE = re.compile(r"^[A-Za-z0-9._/@+=-]+$")


def checkpoint_dir_problem(value: str) -> str | None:
    """Why `value` cannot be a checkpoint folder, or None."""
    if len(value) > MAX_LENGTH:
        return f"{len(value)} characters; at most {MAX_LENGTH}"
    if not _SAFE.match(value):
        return f"{value!r}: use letters, digits and . _ - / @ + = only (no spaces or quotes)"
    if ".." in value.split("/"):
        return (f"{value!r} climbs out with '..': name the folder from the working directory down, or give an "
                "absolute path")
    path = PurePosixPath(value)
    if path == PurePosixPath("."):
        return f"{value!r} is the working directory itself: name the folder your script saves its checkpoints in, " \
               "e.g. \"outputs\""
    if path.is_absolute():
        return _absolute_problem(value, PurePosixPath("/", *path.parts[1:]))
    return None


# The instance's own trees: the agent moves aside what looks like a stray checkpoint in its folder and
# keeps everything else there when the job ends, so it must never be given one of these.
_SYSTEM = tuple(PurePosixPath(p) for p in ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root",
                                            "/run", "/sbin", "/sys", "/usr", "/var"))
_RUNTIME = PurePosixPath("/opt/spot-trainer")  # the runtime, its state and the job's code (work/)


def _absolute_problem(value: str, path: PurePosixPath) -> str | None:
    if len(path.parts) < 3:
        return f"{value!r} is the root or a folder right under it: name a folder of its own, e.g. \"/mnt/checkpoints\""
    if any(path.is_relative_to(tree) for tree in _SYSTEM):
        return f"{value!r} lies in the system's own folders: use a folder of the job's, e.g. \"/mnt/checkpoints\""
    if path.is_relative_to(_RUNTIME) and path != _RUNTIME / "checkpoints":
        return (f"{value!r} lies in Spot Trainer's own folder: give the folder relative to the working directory "
                "(e.g. \"outputs\" for /opt/spot-trainer/work/outputs)")
    return None


def check_checkpoint_dir(run: RunSpec) -> None:
    if run.checkpoint_dir and (problem := checkpoint_dir_problem(run.checkpoint_dir)):
        raise field_error("run.checkpoint_dir", problem)


def shipped_path(run: RunSpec) -> str | None:
    """The checkpoint folder inside the shipped workdir, as a path from its root; None when outside it.
    Whatever a local run left there must not travel with the code (it would be resumed as the job's own)."""
    if not run.workdir or not run.checkpoint_dir or run.checkpoint_dir.startswith("/"):
        return None
    return PurePosixPath(run.checkpoint_dir).as_posix()
