"""What stops the command, read from the local metadata service over real HTTP: a spot notice, a
rebalance recommendation only for a job that reacts to them, scale-in; and without metadata, training
goes on, said once, and the service is asked again after a back-off."""

from __future__ import annotations

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.instance.imds import ImdsClient
from spot_trainer.agent.watches.notice_watch import IMDS_BACKOFF_SECONDS, IMDS_RETRY_SECONDS, NoticeWatch
from tests.support.clock import ManualClock


def test_each_reason_to_stop_and_rebalance_only_for_a_job_that_reacts_to_it() -> None:
    with FakeImds() as imds:
        ignoring = NoticeWatch(ImdsClient(imds.url), react_to_rebalance=False, log=print)
        reacting = NoticeWatch(ImdsClient(imds.url), react_to_rebalance=True, log=print)
        assert (ignoring.reason(), reacting.reason()) == (None, None)
        imds.recommend_rebalance()
        assert (ignoring.reason(), reacting.reason()) == (None, "rebalance recommendation")
        imds.announce_interruption()
        assert (ignoring.reason(), reacting.reason()) == ("spot interruption notice",) * 2
        imds.clear()
        imds.set_target_lifecycle_state("Terminated")
        assert (ignoring.reason(), reacting.reason()) == ("scale-in (lifecycle Terminated)",) * 2


def test_without_metadata_training_goes_on_said_once_and_it_asks_again_after_a_back_off() -> None:
    imds = FakeImds().start()
    imds.stop()  # its port, with nothing behind it
    lines: list[str] = []
    clock = ManualClock(0.0)
    watch = NoticeWatch(ImdsClient(imds.url, attempts=1, timeout=0.5), react_to_rebalance=False,
                        log=lines.append, clock=clock)
    assert watch.reason() is None
    clock.advance(IMDS_BACKOFF_SECONDS)
    assert watch.reason() is None
    assert len(lines) == 1 and "interruption notices cannot be seen" in lines[0], lines
    imds.start()  # back, with a notice
    try:
        imds.announce_interruption()
        assert watch.reason() is None, "asked again before its back-off ended"
        clock.advance(IMDS_BACKOFF_SECONDS)
        assert watch.reason() == "spot interruption notice"
    finally:
        imds.stop()


def test_an_error_from_a_service_that_is_there_is_asked_again_within_a_second_or_two() -> None:
    clock = ManualClock(0.0)
    with FakeImds() as imds:
        watch = NoticeWatch(ImdsClient(imds.url), react_to_rebalance=False, log=print, clock=clock)
        imds.fail_gets(1)  # the very first look at the notice path is a 500
        imds.announce_interruption()
        assert watch.reason() is None
        clock.advance(IMDS_RETRY_SECONDS)
        assert watch.reason() == "spot interruption notice"


def test_the_notice_path_answering_with_a_body_that_is_not_json_is_a_notice() -> None:
    with FakeImds() as imds:
        watch = NoticeWatch(ImdsClient(imds.url), react_to_rebalance=False, log=print)
        imds.announce_raw_interruption("<html>terminate</html>")
        assert watch.reason() == "spot interruption notice"
        assert watch.reclaim_at is not None  # two minutes from when it was seen
