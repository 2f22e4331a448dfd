"""Each instance's boot read back from the job's events (`boot`, `first_step`): when its agent started
after the launch, how its environment came, when it trained its first step. `status` shows the last
replacement's figure beside the first instance's; the local report shows every instance's."""

from __future__ import annotations

from typing import Any

from ...storage.record_kinds import EventKind


def boot_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per instance that booted, in the order they booted."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        instance = str(event.get("instance"))
        if event.get("kind") == EventKind.BOOT and instance not in rows:
            environment = event.get("environment") or {}
            rows[instance] = {"instance": instance, "agent_started_s": event.get("agent_started_s"),
                              "environment": environment.get("how"), "environment_s": environment.get("seconds"),
                              "environment_bytes": environment.get("bytes"), "first_step_s": None}
        elif event.get("kind") == EventKind.FIRST_STEP and instance in rows and rows[instance]["first_step_s"] is None:
            rows[instance]["first_step_s"] = event.get("since_launch_s")
    return list(rows.values())


def first_and_last(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first instance that trained and the last replacement that did; None with fewer than two."""
    trained = [row for row in rows if isinstance(row["first_step_s"], (int, float))]
    return (trained[0], trained[-1]) if len(trained) >= 2 else None


def describe_boots(events: list[dict[str, Any]]) -> list[str]:
    """`status`'s line: the last replacement's launch → first step, against the first instance's."""
    pair = first_and_last(boot_rows(events))
    if pair is None:
        return []
    first, last = pair
    how = f", environment {last['environment']}" if last["environment"] else ""
    return [f"replacement    {last['instance']} trained {last['first_step_s']:.1f}s after its launch{how} "
            f"(the first instance: {first['first_step_s']:.1f}s)"]
