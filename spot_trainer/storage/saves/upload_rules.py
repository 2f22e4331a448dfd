"""Which rule decides when a checkpoint file goes up, said in one line a user can act on.

A file whose format proves it whole (whole_files.py) goes up once it does and has lain still for
SETTLE_SECONDS; any other file under a step or series name waits until a higher step appears or the
command exits, as nothing else says its writer has finished.
"""

from __future__ import annotations

import re

from ..files import whole_files
from . import frameworks
from .layouts import Checkpoint

_FORMAT_SHOWN_AFTER = 16  # bytes: fewer, and the writer may not have put its format's first bytes down yet
_NUMBER = re.compile(r"\d+")


def rule_line(checkpoint: Checkpoint) -> str | None:
    """`checkpoint_40.pt: a torch archive, uploaded once whole and still 2 s`; None where the layout's own
    rule needs no word (ours, HF, Lightning, a library's folder) or the file is too new to tell."""
    path = checkpoint.path
    if not frameworks.framework_of(checkpoint.layout).catch_all or not path.is_file():
        return None
    try:
        size = path.stat().st_size
    except OSError:  # pruned while we looked
        return None
    if (found := whole_files.format_of(path)) is not None:
        return (f"{path.name}: {whole_files.format_name(path, found)}, uploaded once whole and still "
                f"{whole_files.SETTLE_SECONDS:.0f} s")
    if size < _FORMAT_SHOWN_AFTER:
        return None
    return (f"{path.name}: uploaded once a higher step appears or the command exits, as its format cannot prove "
            "it whole (a legacy pickle or another format); save it as step-<N>, written under a temporary name "
            "and renamed, or with torch.save's default zip format, to have it go up at once")


def rule_key(line: str) -> str:
    """One key per name shape and rule: the line said for checkpoint_20.pt is not said again for checkpoint_40.pt."""
    return _NUMBER.sub("#", line)
