"""What a checkpoint's layout is, as types: the layouts the runtime knows, and what classifying an entry of
CHECKPOINT_DIR gives (its layout and its step). Standard library only.

A layout is an enum member: the runtime's own are `Layout`'s; a framework registered beside them
(frameworks.register) names its layout with a member of a StrEnum of its own. Each is its name as text too,
so logs and records show it as they always have ('hf', 'lightning').
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Layout(StrEnum):
    OURS = "ours"  # step-<N>
    HF = "hf"  # checkpoint-<N>/
    LIGHTNING = "lightning"  # *.ckpt
    GENERIC = "generic"  # any name with a step number
    SERIES = "series"  # names that differ in one rising number
    FIXED = "fixed"  # one name rewritten, the step inside


@dataclass(frozen=True)
class Classified:
    """An entry the layouts take for a checkpoint: its layout and the step it holds."""

    layout: StrEnum
    step: int
