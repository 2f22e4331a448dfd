"""What each instance spent before it trained, from the job's events (`boot`, `first_step`): when its agent
started after the launch, how its environment came (built, restored from the env cache, the image's),
and when it trained its first step. The report shows one line per instance, first to last."""

from __future__ import annotations

from typing import Any


def boot_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per instance that booted, in the order they booted."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        instance = str(event.get("instance"))
        if event.get("kind") == "boot" and instance not in rows:
            environment = event.get("environment") or {}
            rows[instance] = {"instance": instance, "agent_started_s": event.get("agent_started_s"),
                              "environment": environment.get("how"), "environment_s": environment.get("seconds"),
                              "environment_bytes": environment.get("bytes"), "first_step_s": None}
        elif event.get("kind") == "first_step" and instance in rows and rows[instance]["first_step_s"] is None:
            rows[instance]["first_step_s"] = event.get("since_launch_s")
    return list(rows.values())


def _seconds(value: Any) -> str:
    return f"{value:.1f}s" if isinstance(value, (int, float)) else "-"


def boot_line(row: dict[str, Any]) -> str:
    environment = {"image": "the image's", None: "not recorded"}.get(row["environment"], row["environment"])
    if row["environment"] in ("built", "restored"):
        size = row["environment_bytes"] or 0
        environment += f" in {_seconds(row['environment_s'])}" + (f" ({size / 1e6:.1f} MB)" if size else "")
    return (f"  boot {row['instance']:<21}agent {_seconds(row['agent_started_s'])} after launch, environment "
            f"{environment}, first step {_seconds(row['first_step_s'])} after launch")


def replacement_phrase(rows: list[dict[str, Any]]) -> str:
    """The first instance's and the last replacement's launch → first step, and their ratio."""
    timed = [row["first_step_s"] for row in rows if isinstance(row["first_step_s"], (int, float))]
    if len(timed) < 2:
        return ""
    first, last = timed[0], timed[-1]
    return f"  launch → first step   first instance {first:.1f}s, last replacement {last:.1f}s" + \
        (f" ({last / first:.0%} of the first's)" if first else "")
