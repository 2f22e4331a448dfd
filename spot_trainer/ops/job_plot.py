"""The job's life as one standalone SVG that any browser opens, drawn with matplotlib (its SVG backend: no
display, no browser code): steps over wall time with redone work shaded, each instance as a bar coloured
by market from its launch to its end, each notice and power-off where it happened, each pause and resume
once, and the spend when there is one to show. A job of several regions gets a panel of its regions under the
steps (region_plot.py): where it was placed, where its instances ran, each move and each restore across regions.

Every drawn element carries an id (`instance-<id>`, `interruption-<id>` and `power-off-<id>` for the
instance lost, `paused-<n>`, `resumed-<n>`, `redone-<n>`, `last-step`, `spend`, `budget`), so a reader
or a test can find it in the file. A mark's line is repeated in every panel; only the step panel's
carries its id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .job_story import JobStory, Mark
from .problem import JobProblem
from .region_plot import MOVE_COLOUR, draw_regions, panel_rows
from .region_story import RegionsStory

MARKET_COLOURS = {"spot": "#1f77b4", "on-demand": "#ff7f0e"}
MARK_STYLES = {"interruption": ("#d62728", "--"), "power-off": ("#000000", ":"), "paused": ("#7f7f7f", "-."),
               "resumed": ("#2ca02c", "-.")}
# A cap far above the spend would flatten its curve to the axis: drawn as a line only within this reach.
CAP_IN_REACH = 3.0
INCHES_PER_SHARE = 2.6 * 3 / 7  # the height of one share of [3, 2, 2] in a figure of three 2.6-inch panels


def pyplot() -> Any:
    """matplotlib's pyplot on its file-only backend, or one line saying how to install it."""
    try:
        import matplotlib
    except ImportError as error:
        raise JobProblem("--plot needs matplotlib: pip install 'spot-trainer[plot]' (or matplotlib)") from error
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and smaller
    import matplotlib.pyplot as plt

    return plt


def draw(story: JobStory, path: Path, regions: RegionsStory | None = None) -> None:
    """`regions`: a job of several regions, drawn in a panel of its own under the steps."""
    plt = pyplot()
    spend = story.spent > 0  # a panel only when it shows a spend; never a flat line at $0
    rows = 3 if spend else 2
    inches = 0.0 if regions is None else 0.6 + 0.4 * panel_rows(regions)  # the regions panel's, under the steps
    heights = [3.0, *([inches / INCHES_PER_SHARE] if regions is not None else []), 2.0, 2.0][:rows + (inches > 0)]
    figure, axes = plt.subplots(len(heights), 1, sharex=True, figsize=(10, 2.6 * rows + inches),
                                height_ratios=heights, layout="constrained")
    origin = _origin(story, regions)

    def minutes(at: float) -> float:
        return (at - origin) / 60.0

    _steps(axes[0], story, minutes)
    if regions is not None:
        draw_regions(axes[1], regions, minutes)
        _legend_above(axes[1])
    _instances(axes[-2 if spend else -1], story, minutes)
    if spend:
        _spend(axes[-1], story, minutes)
    for axis in axes:
        _marks(axis, story.marks, minutes, named=axis is axes[0])
        if regions is not None and axis is not axes[1]:
            for move in regions.moves:  # the move's own line, with its id and reason, is in the regions panel
                axis.axvline(minutes(move.at), color=MOVE_COLOUR, linestyle="-", linewidth=1.2)
    _legend(axes[0])
    axes[-1].set_xlabel("minutes since the first instance" if origin == story.start else
                        "minutes since the first record")
    figure.suptitle(f"job {story.job}{_unshown_budget(story, spend)}")
    figure.savefig(path, format="svg")
    plt.close(figure)


def _origin(story: JobStory, regions: RegionsStory | None) -> float:
    """Time 0: the first instance, step or mark; for a job of several regions, a move before them all."""
    if regions is None:
        return story.start
    if not (story.steps or story.bars or story.marks):
        return regions.start
    return min(story.start, regions.start)


def _marks(axis: Any, marks: list[Mark], minutes: Callable[[float], float], *, named: bool) -> None:
    counts: dict[str, int] = {}
    for mark in marks:
        colour, style = MARK_STYLES[mark.kind]
        line = axis.axvline(minutes(mark.at), color=colour, linestyle=style, linewidth=1)
        if not named:
            continue
        number = counts[mark.kind] = counts.get(mark.kind, -1) + 1
        line.set_gid(f"{mark.kind}-{mark.instance}" if mark.instance else f"{mark.kind}-{number}")
        line.set_label(mark.kind if number == 0 else None)  # one legend entry per kind


def _legend(axis: Any) -> None:
    """A legend only over labelled artists (matplotlib warns on an empty one)."""
    handles, labels = axis.get_legend_handles_labels()
    if handles:
        axis.legend(handles, labels, loc="upper left", fontsize=8)


def _legend_above(axis: Any) -> None:
    """A legend in one line over the panel, whose rows are full."""
    handles, labels = axis.get_legend_handles_labels()
    if handles:
        axis.legend(handles, labels, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=len(labels), fontsize=7,
                    frameon=False, borderaxespad=0.2)


def _steps(axis: Any, story: JobStory, minutes: Callable[[float], float]) -> None:
    if story.steps:
        (line,) = axis.plot([minutes(p.at) for p in story.steps], [p.step for p in story.steps], marker=".",
                            color="#333333", label="step")
        line.set_gid("steps")
    for index, span in enumerate(story.redone):
        shade = axis.axvspan(minutes(span.start), minutes(span.end), color="#d62728", alpha=0.15,
                             label="redone" if index == 0 else None)
        shade.set_gid(f"redone-{index}")
    if story.last_step is not None:
        axis.set_ylim(0, story.last_step * 1.08 + 1)
        text = axis.annotate(f"step {story.last_step}", (minutes(story.steps[-1].at), story.last_step),
                             textcoords="offset points", xytext=(-40, 6), fontsize=8)
        text.set_gid("last-step")
    axis.set_ylabel("step")


def _instances(axis: Any, story: JobStory, minutes: Callable[[float], float]) -> None:
    for row, bar in enumerate(story.bars):
        (patch,) = axis.barh(row, minutes(bar.end) - minutes(bar.start), left=minutes(bar.start), height=0.6,
                             color=MARKET_COLOURS.get(bar.market, "#999999"))
        patch.set_gid(f"instance-{bar.instance}")
        axis.text(minutes(bar.start), row, f" {bar.instance_type} {bar.market}", va="center", fontsize=7)
    axis.set_yticks(range(len(story.bars)), [bar.instance for bar in story.bars], fontsize=7)
    axis.set_ylabel("instances")


def _spend(axis: Any, story: JobStory, minutes: Callable[[float], float]) -> None:
    """The spend on its own scale; the cap as a line when it is within reach of it, else written as text."""
    floor = " (priced instances only: at least)" if story.unpriced else ""
    (line,) = axis.plot([minutes(t) for t, _ in story.spend], [usd for _, usd in story.spend],
                        color="#9467bd", label=f"spend{floor}")
    line.set_gid("spend")
    top = story.spent
    if story.budget_usd is not None and story.budget_usd <= CAP_IN_REACH * story.spent:
        cap = axis.axhline(story.budget_usd, color="#d62728", linewidth=1.5, label=f"budget ${story.budget_usd:g}")
        cap.set_gid("budget")
        top = max(top, story.budget_usd)
    elif story.budget_usd is not None:
        share = story.spent / story.budget_usd
        note = axis.text(0.99, 0.9, f"budget ${story.budget_usd:g}: {share:.1%} of it spent", ha="right", va="top",
                         transform=axis.transAxes, fontsize=8, color="#d62728")
        note.set_gid("budget")
    axis.set_ylim(0, top * 1.15)
    axis.yaxis.set_major_formatter(lambda value, _: f"${value:.3g}")
    axis.set_ylabel("USD")
    _legend(axis)


def _unshown_budget(story: JobStory, spend_shown: bool) -> str:
    """A cap with no spend panel to stand in is said in the title, with why there is no panel."""
    if story.budget_usd is None or spend_shown:
        return ""
    why = "no instance priced" if story.unpriced else "no spend measured yet"
    return f" (budget ${story.budget_usd:g}; {why})"
