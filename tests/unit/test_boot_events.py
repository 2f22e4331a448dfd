"""What a boot costs is in the job's events: `boot` says when the agent started after the launch and how
the environment came (user data's record), `first_step` when this instance first trained; `start` and
`resume` carry their seconds since launch."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from spot_trainer.agent.records.boot_events import BootClock
from spot_trainer.agent.records.boot_times import describe_boots
from spot_trainer.agent.records.telemetry import RunTelemetry


class Events:
    instance = "i-0boot"

    def __init__(self) -> None:
        self.recorded: list[tuple[str, dict[str, Any]]] = []

    def append_event(self, kind: str, **fields: Any) -> None:
        self.recorded.append((kind, fields))


def telemetry(tmp_path: Path, launched_ago: float) -> tuple[RunTelemetry, Events]:
    phases = tmp_path / "boot-phases.jsonl"
    phases.write_text(json.dumps({"phase": "environment", "how": "restored", "seconds": 4.2, "bytes": 912,
                                  "at": 1}) + "\n")
    events = Events()
    boot = BootClock(time.time() - launched_ago, phases)
    return RunTelemetry(store=events, cloud=None, boot=boot), events  # type: ignore[arg-type]


def test_the_boot_and_the_first_step_are_events_with_their_seconds_since_launch(tmp_path: Path) -> None:
    run, events = telemetry(tmp_path, launched_ago=30)
    run.event("start", attempt=1)
    run.event("resume", step=400)
    for step in (401, 402):
        run.command_output("stdout", json.dumps({"event": "step", "step": step, "loss": 1.0}))
    kinds = [kind for kind, _ in events.recorded]
    assert kinds == ["start", "boot", "resume", "first_step"]
    fields = dict(events.recorded)
    assert 29 < fields["boot"]["agent_started_s"] < 60
    assert fields["boot"]["environment"] == {"how": "restored", "seconds": 4.2, "bytes": 912}
    assert fields["first_step"]["step"] == 401 and fields["first_step"]["since_launch_s"] >= 30
    assert fields["start"]["since_launch_s"] >= 30 and fields["resume"]["since_launch_s"] >= 30


def test_without_a_record_of_the_environment_the_boot_event_says_nothing_of_it(tmp_path: Path) -> None:
    run, events = telemetry(tmp_path, launched_ago=5)
    (tmp_path / "boot-phases.jsonl").write_text("not json\n")
    run.event("start", attempt=1)
    assert dict(events.recorded)["boot"]["environment"] == {}


def test_status_shows_the_last_replacements_launch_to_first_step_beside_the_first_instances() -> None:
    events = [{"kind": "boot", "instance": "i-first", "agent_started_s": 11.3, "environment": {"how": "built"}},
              {"kind": "first_step", "instance": "i-first", "since_launch_s": 14.1},
              {"kind": "boot", "instance": "i-second", "agent_started_s": 4.0, "environment": {"how": "restored"}},
              {"kind": "first_step", "instance": "i-second", "since_launch_s": 6.8}]
    assert describe_boots(events) == ["replacement    i-second trained 6.8s after its launch, environment restored "
                                      "(the first instance: 14.1s)"]
    assert describe_boots(events[:2]) == []  # no replacement yet
