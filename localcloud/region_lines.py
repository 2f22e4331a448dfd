"""A job of several regions in the local run's report: each move the regions controller made (when, where to,
why), and each start that restored the job's newest step from another region's bucket, with the bytes that
crossed and what they cost at AWS's inter-region transfer price."""

from __future__ import annotations

from typing import Any

from spot_trainer.storage.record_kinds import EventKind

# Data transfer out of a US region to another region, per GB (https://aws.amazon.com/ec2/pricing/on-demand/,
# "Data Transfer OUT From Amazon EC2 To" another AWS region; S3 bills the same rate); more between continents.
INTER_REGION_USD_PER_GB = 0.02


def region_moves(events: list[dict[str, Any]], started_at: float) -> list[dict[str, Any]]:
    return [{"after_seconds": round(float(event["epoch"]) - started_at, 1), "from": event.get("from"),
             "to": event.get("to"), "reason": event.get("reason")}
            for event in events if event.get("kind") == EventKind.REGION]


def crossings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each restore across regions: where it ran (the instance's bucket's region), where from, the step, the bytes."""
    return [{"step": event.get("step"), "from": event.get("region"), "bytes": int(event.get("bytes") or 0),
             "instance": event.get("instance")}
            for event in events if event.get("kind") == EventKind.REGION_RESTORE]


def lines(moves: list[dict[str, Any]], crossed: list[dict[str, Any]]) -> list[str]:
    shown = [f"  region move            {move['from']} → {move['to']} after {move['after_seconds']:.0f}s: "
             f"{move['reason']}" for move in moves]
    for crossing in crossed:
        usd = crossing["bytes"] / 1e9 * INTER_REGION_USD_PER_GB
        shown.append(f"  across regions         step {crossing['step']} restored from {crossing['from']} by "
                     f"{crossing['instance']}: {crossing['bytes']} bytes (${usd:.6f} at "
                     f"${INTER_REGION_USD_PER_GB}/GB)")
    return shown
