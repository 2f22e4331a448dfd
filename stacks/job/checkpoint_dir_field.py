"""run.checkpoint_dir: the folder a user's own script already saves into, so the script needs no change.

The agent watches, uploads from and restores into this folder instead of its own default. A relative
path is taken from the command's working directory (where `run.workdir` is unpacked), which is where a
script's `output_dir="outputs"` lands. The job file and the console's CheckpointFolder parameter judge
a value by the same rules: `checkpoint_dir_problem` says why in words, CHECKPOINT_FOLDER_PATTERN is
the same rule as the template's AllowedPattern (tests/unit/test_checkpoint_dir_job.py holds them equal).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from spot_trainer.settings import setting
from stacks.job.spec import RunSpec, field_error

MAX_LENGTH = 200
# One word in the agent's environment file and bootstrap's paths: no spaces or quotes.
_CHARS = "A-Za-z0-9._@+=-"
# The instance's own trees: the agent moves aside what looks like a stray checkpoint in its folder and keeps
# everything else there when the job ends, so it must never be given one of these.
SYSTEM_FOLDERS = ("bin", "boot", "dev", "etc", "lib", "lib64", "proc", "root", "run", "sbin", "sys", "usr", "var")
# The agent's own folder (naming it changes nothing), beside the runtime, its state and the job's code (work/).
AGENT_DEFAULT = setting("run.checkpoint_dir").agent_value.lstrip("/")
RUNTIME_FOLDER = str(PurePosixPath(AGENT_DEFAULT).parent)

_SEGMENT = rf"(?!\.\.?(?:/|$))[{_CHARS}]+"  # a plain name: not "." or ".."
_RELATIVE = rf"(?!/)(?!(?:\./*)+$)(?!(?:.*/)?\.\.(?:/|$))[/{_CHARS}]+"
_ABSOLUTE = (rf"/(?!(?:{'|'.join(SYSTEM_FOLDERS)})(?:/|$))(?!{RUNTIME_FOLDER}(?:/|$)(?!checkpoints/?$))"
             rf"{_SEGMENT}(?:/{_SEGMENT})+/?")
CHECKPOINT_FOLDER_PATTERN = rf"^$|^(?=.{{1,{MAX_LENGTH}}}$)(?:{_RELATIVE}|{_ABSOLUTE})$"
CHECKPOINT_FOLDER_RULE = ('empty, or a folder from the working directory like outputs (no ".."), or an absolute '
                          "one like /mnt/checkpoints outside the system's and /opt/spot-trainer")


def checkpoint_dir_problem(value: str) -> str | None:
    """Why `value` cannot be a checkpoint folder, or None."""
    if len(value) > MAX_LENGTH:
        return f"{len(value)} characters; at most {MAX_LENGTH}"
    if not re.fullmatch(rf"[/{_CHARS}]+", value):
        return f"{value!r}: use letters, digits and . _ - / @ + = only (no spaces or quotes)"
    if ".." in value.split("/"):
        return (f"{value!r} climbs out with '..': name the folder from the working directory down, or give an "
                "absolute path")
    if not value.startswith("/"):
        if PurePosixPath(value) == PurePosixPath("."):
            return (f"{value!r} is the working directory itself: name the folder your script saves its checkpoints "
                    'in, e.g. "outputs"')
        return None
    return _absolute_problem(value)


def _absolute_problem(value: str) -> str | None:
    segments = value[1:].removesuffix("/").split("/")  # one trailing slash is as good as none
    if len(segments) < 2:
        return f"{value!r} is the root or a folder right under it: name a folder of its own, e.g. \"/mnt/checkpoints\""
    if any(segment in ("", ".") for segment in segments):
        return f"{value!r}: write the path plainly, without // or /./"
    if segments[0] in SYSTEM_FOLDERS:
        return f"{value!r} lies in the system's own folders: use a folder of the job's, e.g. \"/mnt/checkpoints\""
    path = "/".join(segments)
    if (path + "/").startswith(RUNTIME_FOLDER + "/") and path != AGENT_DEFAULT:
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


def check_checkpoint_files(names: tuple[str, ...]) -> None:
    """run.checkpoint_files: each an entry of the checkpoint folder by its own name (a file or a folder), one
    the agent can find and a restore can put back there."""
    for name in names:
        if (problem := _entry_problem(name)) is not None:
            raise field_error("run.checkpoint_files", f"{name!r}: {problem}")


def _entry_problem(name: str) -> str | None:
    if not name.strip() or name != name.strip():
        return "expected the name of a file or folder in the checkpoint folder, without spaces around it"
    if "/" in name or "\\" in name or name in (".", ".."):
        return "expected one name inside the checkpoint folder, not a path: name the folder that holds the files"
    if name.startswith("."):
        return "a name starting with '.' is a write in progress to the agent and never uploaded"
    if "," in name:
        return "a name with a comma cannot be passed to the instance"
    return None
