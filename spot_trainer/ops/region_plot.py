"""The regions panel of a job of several regions (region_story.py drawn; job_plot.py places it): a row per region,
home on top; a light band where the regions controller had the job, labelled with the steps trained there; a solid
bar where each instance ran; each move as a line with its reason; each restore across regions as a triangle
with its step and the bytes that crossed. Unknowns are written as unknown.

Ids: `stay-<n>` (its label `stay-<n>-steps`), `ran-<instance>`, `move-<n>` (its reason `move-<n>-reason`),
`region-restore-<n>` (its text `region-restore-<n>-text`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from .region_story import Crossing, RegionMove, RegionsStory, Stay

REGION_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
MOVE_COLOUR = "#d62728"
MOVE_ROW = 0.55  # the height of a move's reason line, in rows
REASON_WIDTH = 70  # characters before a reason wraps


def panel_rows(regions: RegionsStory) -> float:
    """The panel's height in rows: one per region, and a line per move's reason above them."""
    return len(regions.regions) + MOVE_ROW * sum(len(_move_lines(i, m)) for i, m in enumerate(regions.moves))


def draw_regions(axis: Any, regions: RegionsStory, minutes: Callable[[float], float]) -> None:
    row = {region: index for index, region in enumerate(regions.regions)}
    colour = {region: REGION_COLOURS[index % len(REGION_COLOURS)] for index, region in enumerate(regions.regions)}
    for index, stay in enumerate(regions.stays):
        _stay(axis, index, stay, row.get(stay.region), colour.get(stay.region, "#999999"), minutes)
    for index, (region, bar) in enumerate((region, bar) for region, bars in regions.ran.items() for bar in bars):
        (patch,) = axis.barh(row[region], minutes(bar.end) - minutes(bar.start), left=minutes(bar.start),
                             height=0.25, color=colour[region], label="an instance ran" if index == 0 else None)
        patch.set_gid(f"ran-{bar.instance}")
    for index, crossing in enumerate(regions.crossings):
        _crossing(axis, index, crossing, row[crossing.region], minutes)
    lines = 0.0
    middle = (minutes(regions.start) + minutes(regions.end)) / 2
    for index, move in enumerate(regions.moves):
        line = axis.axvline(minutes(move.at), color=MOVE_COLOUR, linestyle="-", linewidth=1.2,
                            label="region move" if index == 0 else None)
        line.set_gid(f"move-{index}")
        wrapped = _move_lines(index, move)
        lines += MOVE_ROW * len(wrapped)
        left = minutes(move.at) < middle  # the reason reads away from the line, into the panel
        text = axis.text(minutes(move.at), -0.5 - lines + MOVE_ROW * len(wrapped) / 2,
                         "\n".join(f" {w} " for w in wrapped), fontsize=7, va="center", ha="left" if left else "right",
                         color=MOVE_COLOUR, multialignment="left")
        text.set_gid(f"move-{index}-reason")
    axis.set_ylim(len(regions.regions) - 0.5, -0.5 - lines)  # home on top, the moves' reasons above it
    axis.set_yticks(range(len(regions.regions)),
                    [f"{r} (bucket unknown)" if r in regions.unread else r for r in regions.regions], fontsize=7)
    axis.set_ylabel("regions")


def steps_text(stay: Stay) -> str:
    if stay.to_step is None:
        return "no step reached"
    if stay.from_step is None:
        return f"steps ?→{stay.to_step} (where it began is unknown)"
    return f"steps {stay.from_step}→{stay.to_step} ({stay.to_step - stay.from_step} trained)"


def size_text(size: int | None) -> str:
    if size is None:
        return "bytes unknown"
    return f"{size} bytes" if size < 1_000_000 else f"{size / 1e6:.1f} MB"


def _stay(axis: Any, index: int, stay: Stay, row: int | None, colour: str,
          minutes: Callable[[float], float]) -> None:
    if row is None:  # a region the job file no longer lists: its stay is told in the move's reason alone
        return
    (band,) = axis.barh(row, minutes(stay.end) - minutes(stay.start), left=minutes(stay.start), height=0.75,
                        color=colour, alpha=0.2, label="where the job was placed" if index == 0 else None)
    band.set_gid(f"stay-{index}")
    text = axis.text(minutes(stay.start), row - 0.14, f" {steps_text(stay)}", fontsize=7, va="bottom")  # over the bars
    text.set_gid(f"stay-{index}-steps")


def _crossing(axis: Any, index: int, crossing: Crossing, row: int, minutes: Callable[[float], float]) -> None:
    (mark,) = axis.plot([minutes(crossing.at)], [row], marker="v", color="#000000", linestyle="none",
                        label="restored across regions" if index == 0 else None)
    mark.set_gid(f"region-restore-{index}")
    step = "?" if crossing.step is None else str(crossing.step)
    text = axis.annotate(f"step {step} from {crossing.source}: {size_text(crossing.bytes)}",
                         (minutes(crossing.at), row), textcoords="offset points", xytext=(5, -4), fontsize=7,
                         va="top")
    text.set_gid(f"region-restore-{index}-text")


def _move_lines(index: int, move: RegionMove) -> list[str]:
    return textwrap.wrap(f"move {index + 1}: {move.source} → {move.target}: {move.reason}", REASON_WIDTH,
                         break_on_hyphens=False)
