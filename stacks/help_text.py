"""A command's description for `--help`: its module docstring's first paragraph, whole and on one line
(a docstring's first line alone stops mid-sentence wherever the text wraps)."""

from __future__ import annotations


def first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())
