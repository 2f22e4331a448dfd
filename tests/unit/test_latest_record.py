"""latest.json as the store writes and reads it: the bytes S3 holds from earlier versions read back and are written
again unchanged, and a record this runtime did not write is refused with what is wrong in it."""

from __future__ import annotations

import json

import pytest

from spot_trainer.storage.s3.latest_record import LatestRecord

WRITTEN_BEFORE = {"step": 120, "key": "job/checkpoints/step-00000120/", "lease_token": 3, "written_at": 1760000000.5}


def test_a_record_in_s3_reads_and_is_written_back_byte_for_byte() -> None:
    body = json.dumps(WRITTEN_BEFORE, indent=1).encode()  # how every earlier version wrote it
    record = LatestRecord.from_json(body)
    assert record == LatestRecord(120, "job/checkpoints/step-00000120/", 3, 1760000000.5)
    assert record.to_json() == body


def test_a_record_without_its_key_or_time_still_reads() -> None:
    assert LatestRecord.from_json(b'{"step": 50, "lease_token": 0}') == LatestRecord(50)
    assert LatestRecord.from_json(b'{"step": 7}').lease_token == 0


@pytest.mark.parametrize(("body", "said"), [
    (b"", "not valid JSON"), (b"<html>oops</html>", "not valid JSON"), (b"[1]", "expected a JSON object, found list"),
    (b'{"step": "ten"}', "step 'ten'"), (b'{"step": -1}', "step -1"), (b'{"step": true}', "step True"),
    (b'{"step": 5, "lease_token": 1.5}', "lease token 1.5"),
])
def test_a_damaged_record_is_refused_with_what_is_wrong(body: bytes, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        LatestRecord.from_json(body)
