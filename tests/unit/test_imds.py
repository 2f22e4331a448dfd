"""The IMDSv2 client against the local metadata service over real HTTP."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.instance.imds import ImdsClient, ImdsError
from tests.support.clock import ManualClock


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    with FakeImds(instance_id="i-0feedc0ffee000001", region="eu-west-1") as server:
        yield server


def test_no_notice_reads_as_none_and_identity_is_served(imds: FakeImds) -> None:
    client = ImdsClient(imds.url)
    assert client.instance_action() is None
    assert client.rebalance_recommendation() is None
    assert client.target_lifecycle_state() == "InService"
    assert client.instance_id() == "i-0feedc0ffee000001"
    assert client.region() == "eu-west-1"


def test_notices_arrive_in_the_ec2_formats(imds: FakeImds) -> None:
    client = ImdsClient(imds.url)
    imds.announce_interruption("stop", in_seconds=90)
    imds.recommend_rebalance()
    imds.set_target_lifecycle_state("Terminated")
    action = client.instance_action()
    assert action is not None and action["action"] == "stop"
    assert action["time"].endswith("Z") and len(action["time"]) == len("2026-11-01T12:00:00Z")
    assert set(client.rebalance_recommendation() or {}) == {"noticeTime"}
    assert client.target_lifecycle_state() == "Terminated"
    imds.clear()
    assert client.instance_action() is None and client.target_lifecycle_state() == "InService"


def test_token_is_cached_then_refetched_after_a_401(imds: FakeImds) -> None:
    client = ImdsClient(imds.url)
    for _ in range(5):
        client.instance_id()
    assert imds.token_requests == 1
    imds.revoke_tokens()  # as after a metadata service restart
    assert client.instance_id() == "i-0feedc0ffee000001"
    assert imds.token_requests == 2


def test_token_is_renewed_before_it_expires(imds: FakeImds) -> None:
    clock = ManualClock()
    client = ImdsClient(imds.url, token_ttl=3, clock=clock)  # renewed a second before the server's expiry
    client.instance_id()
    clock.advance(1.9)
    client.instance_id()
    assert imds.token_requests == 1
    clock.advance(0.2)
    assert client.instance_id() == "i-0feedc0ffee000001"
    assert imds.token_requests == 2


def test_service_enforces_imdsv2_tokens(imds: FakeImds) -> None:
    with pytest.raises(urllib.error.HTTPError) as unauthenticated:
        urllib.request.urlopen(imds.url + "/latest/meta-data/instance-id", timeout=2)
    assert unauthenticated.value.code == 401
    no_ttl = urllib.request.Request(imds.url + "/latest/api/token", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as bad_put:
        urllib.request.urlopen(no_ttl, timeout=2)
    assert bad_put.value.code == 400


def test_endpoint_comes_from_the_environment(imds: FakeImds, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url + "/")
    assert ImdsClient().instance_id() == "i-0feedc0ffee000001"
    monkeypatch.delenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    assert ImdsClient().endpoint == "http://169.254.169.254"


def test_unreachable_service_fails_with_one_clear_error_after_retries() -> None:
    imds = FakeImds().start()
    url = imds.url
    imds.stop()  # nothing listens on the port any more
    client = ImdsClient(url, attempts=3, backoff=0.01, timeout=0.5)
    with pytest.raises(ImdsError, match="unreachable"):
        client.instance_action()


def test_standalone_server_takes_notices_from_another_process() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "localcloud.fake_imds", "--instance-id", "i-0standalone00000"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        client = ImdsClient(url)
        assert client.instance_id() == "i-0standalone00000"
        control = urllib.request.Request(url + "/_control/interrupt?in_seconds=30", method="POST")
        urllib.request.urlopen(control, timeout=2).close()
        assert (client.instance_action() or {}).get("action") == "terminate"
        lifecycle = urllib.request.Request(url + "/_control/lifecycle?state=Terminated", method="POST")
        urllib.request.urlopen(lifecycle, timeout=2).close()
        assert client.target_lifecycle_state() == "Terminated"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
