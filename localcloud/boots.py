"""The report's lines for each instance's boot (rows from spot_trainer.agent.records.boot_times): when its agent
started after the launch, how its environment came, when it trained its first step."""

from __future__ import annotations

from typing import Any

from spot_trainer.agent.records.boot_times import first_and_last


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
    pair = first_and_last(rows)
    if pair is None:
        return ""
    first, last = pair[0]["first_step_s"], pair[1]["first_step_s"]
    return f"  launch → first step   first instance {first:.1f}s, last replacement {last:.1f}s" + \
        (f" ({last / first:.0%} of the first's)" if first else "")
