"""The job's life as one standalone SVG that any browser opens, drawn with matplotlib (its SVG backend: no
display, no browser code): steps over wall time with redone work shaded, each instance as a bar coloured
by market, interruptions, power-offs and pauses marked, and spend against the cap when one is set.

Every drawn element carries an id (`instance-<id>`, `interruption-<n>`, `power-off-<id>`, `redone-<n>`,
`last-step`, `spend`, `budget`), so a reader or a test can find it in the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .job_story import JobStory
from .problem import JobProblem

MARKET_COLOURS = {"spot": "#1f77b4", "on-demand": "#ff7f0e"}
MARK_STYLES = {"interruption": ("#d62728", "--"), "power-off": ("#000000", ":"), "paused": ("#7f7f7f", "-."),
               "resumed": ("#2ca02c", "-.")}


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


def draw(story: JobStory, path: Path) -> None:
    plt = pyplot()
    rows = 3 if story.budget_usd is not None else 2
    figure, axes = plt.subplots(rows, 1, sharex=True, figsize=(10, 2.6 * rows), height_ratios=[3, 2, 2][:rows])

    def minutes(at: float) -> float:
        return (at - story.start) / 60.0

    _steps(axes[0], story, minutes)
    _instances(axes[1], story, minutes)
    if rows == 3:
        _spend(axes[2], story, minutes)
    for axis in axes:
        for index, mark in enumerate(story.marks):
            colour, style = MARK_STYLES[mark.kind]
            line = axis.axvline(minutes(mark.at), color=colour, linestyle=style, linewidth=1)
            if axis is axes[0]:
                ident = f"power-off-{mark.instance}" if mark.kind == "power-off" else f"{mark.kind}-{index}"
                line.set_gid(ident)
                line.set_label(mark.kind if mark.kind not in {m.kind for m in story.marks[:index]} else None)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("minutes since the first instance")
    figure.suptitle(f"job {story.job}")
    figure.tight_layout()
    figure.savefig(path, format="svg")
    plt.close(figure)


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
    if story.spend:
        (line,) = axis.plot([minutes(t) for t, _ in story.spend], [usd for _, usd in story.spend], color="#9467bd",
                            label="spend")
        line.set_gid("spend")
    budget = axis.axhline(story.budget_usd, color="#d62728", linewidth=1.5, label=f"budget ${story.budget_usd:g}")
    budget.set_gid("budget")
    axis.set_ylabel("USD")
    axis.legend(loc="upper left", fontsize=8)
