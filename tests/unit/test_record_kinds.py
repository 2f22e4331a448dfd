"""States and event kinds are types in the code and their own text in the records: what the agent writes
stays byte for byte as it was, and records written before still read."""

from __future__ import annotations

import json
from dataclasses import asdict

from spot_trainer.agent.records.status import JobStatus
from spot_trainer.storage.record_kinds import EventKind, JobState
from spot_trainer.storage.s3 import job_keys


def test_a_record_spells_a_state_as_its_text() -> None:
    record = asdict(JobStatus(job="cnn", state=JobState.STOPPED_BY_BUDGET))
    assert '"state": "STOPPED_BY_BUDGET"' in json.dumps(record)


def test_an_event_keeps_its_key_name_and_its_kind_field() -> None:
    assert job_keys.event_name(1_790_000_000.0, "i-a", EventKind.ROUND_RESUME) == \
        job_keys.event_name(1_790_000_000.0, "i-a", "round_resume")
    assert json.dumps({"kind": EventKind.NOT_BIT_IDENTICAL}) == '{"kind": "not_bit_identical"}'


def test_records_written_before_read_as_the_types() -> None:
    assert JobState("DONE") is JobState.DONE and EventKind("budget") is EventKind.BUDGET
    assert {"kind": "paused"}["kind"] == EventKind.PAUSED
