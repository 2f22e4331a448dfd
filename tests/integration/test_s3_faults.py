"""Uploads and restores survive a flaky S3: a fault-injecting HTTP proxy in front of moto server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.moto_server import MotoServer
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.remote_helpers import MB, digests, make_checkpoint, small_part_store
from tests.support.s3_proxy import FaultProxy

# After a SlowDown, adaptive retries cap the client's request rate near 1/s and raise it slowly again:
# right for S3, but many throttles make a test wait tens of seconds. By default: two throttles, then
# resets only; throttles spread over the whole transfer run with -m slow.
FAULT_RATES = [
    pytest.param((2, 0.12, 1.0), id="resets"),
    pytest.param((3, 0.2, 0.5), id="throttles-and-resets", marks=pytest.mark.slow),
]


@pytest.fixture(params=FAULT_RATES)
def flaky_s3(
    request: pytest.FixtureRequest, moto_server: MotoServer, aws_env: dict[str, str]
) -> Iterator[FaultProxy]:
    first_n, fraction, resets = request.param
    with FaultProxy(moto_server.port, first_n=first_n, fraction=fraction, resets=resets) as proxy:
        yield proxy


def test_upload_and_restore_through_503s_and_resets(
    flaky_s3: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    store = small_part_store(bucket, "job-f", endpoint=flaky_s3.endpoint)
    first = make_checkpoint(tmp_path / "local", 1, sizes={"model.pt": 17 * MB + 5, "optim.pt": 2 * MB})
    second = make_checkpoint(tmp_path / "local", 2, sizes={"model.pt": 11 * MB, "extra/x.bin": 12345})
    assert store.upload(first, 1) is UploadOutcome.PUBLISHED
    assert store.upload(second, 2) is UploadOutcome.PUBLISHED
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and digests(restored) == digests(second)
    assert flaky_s3.faults["503"] > 0 and flaky_s3.faults["reset"] > 0, flaky_s3.faults
    # Seen directly from moto (no proxy): exactly what was sent, and latest on the newest step.
    direct = small_part_store(bucket, "job-f")
    assert direct.latest_step() == 2
    assert digests(direct.restore(tmp_path / "direct")) == digests(second)  # type: ignore[arg-type]
