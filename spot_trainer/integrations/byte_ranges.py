"""Byte ranges of a file, (offset, length), and their merging: what a node restores of a sharded step
(storage/saves) and what a rank fetches before it reads (missing_reads.py) are both runs of merged ranges.
Nothing is imported: the storage side reads this without loading any framework or any other module of this room."""

from __future__ import annotations

Range = tuple[int, int]  # (offset, length) in a file


def merged(ranges: list[Range], gap: int = 0) -> list[Range]:
    """The ranges merged, in order, where they overlap, touch or stand at most `gap` bytes apart."""
    out: list[Range] = []
    for offset, length in sorted(ranges):
        if out and offset <= out[-1][0] + out[-1][1] + gap:
            out[-1] = (out[-1][0], max(out[-1][1], offset + length - out[-1][0]))
        else:
            out.append((offset, length))
    return out
