"""When failed uploads become a warning: two steps in a row, or any upload after the command stopped;
each cause announced once; taken back when an upload works again."""

from __future__ import annotations

import errno

from botocore.exceptions import ClientError, EndpointConnectionError

from spot_trainer.storage.failure_causes import FailureCause
from spot_trainer.storage.steps.remote import RemoteStoreError
from spot_trainer.storage.steps.upload_health import LEFT_OUT, UPLOADS_FAILING, UploadHealth, UploadWarning, cause_of


def health() -> tuple[UploadHealth, list[UploadWarning]]:
    said: list[UploadWarning] = []
    return UploadHealth(said.append), said


def test_one_failed_step_is_no_news_but_two_in_a_row_are() -> None:
    watch, said = health()
    watch.failed(10, "S3 answered SlowDown", urgent=False)
    assert said == []
    watch.failed(20, "S3 answered SlowDown", urgent=False)
    assert len(said) == 1 and said[0].first_of_cause
    assert said[0].message.startswith(f"{UPLOADS_FAILING}: S3 answered SlowDown (steps 10, 20)")


def test_a_step_that_works_between_two_failures_breaks_the_run() -> None:
    watch, said = health()
    watch.failed(10, "S3 answered SlowDown", urgent=False)
    watch.succeeded(20)
    watch.failed(30, "S3 answered SlowDown", urgent=False)
    assert said == []


def test_the_same_step_failing_twice_is_one_step() -> None:
    watch, said = health()
    watch.failed(10, "S3 answered SlowDown", urgent=False)
    watch.failed(10, "S3 answered SlowDown", urgent=False)
    assert said == []


def test_a_failed_upload_after_the_command_stopped_warns_at_once() -> None:
    watch, said = health()
    watch.failed(11, "no space left on device (ENOSPC)", urgent=True)
    assert [(w.cause, w.step, w.first_of_cause) for w in said] == [("no space left on device (ENOSPC)", 11, True)]


def test_a_cause_is_announced_once_and_a_new_cause_again() -> None:
    watch, said = health()
    for step in (10, 20, 30):
        watch.failed(step, "S3 answered AccessDenied", urgent=False)
    watch.failed(40, "S3 answered SlowDown", urgent=False)
    assert [w.first_of_cause for w in said] == [True, False, True]
    assert [w.cause for w in said if w.first_of_cause] == ["S3 answered AccessDenied", "S3 answered SlowDown"]


def test_an_upload_that_works_again_takes_the_warning_back_once() -> None:
    watch, said = health()
    watch.failed(10, "S3 answered SlowDown", urgent=True)
    watch.succeeded(20)
    watch.succeeded(30)
    assert [w.message for w in said] == [said[0].message, ""]


def test_files_left_out_warn_and_stay_said_after_the_upload_works() -> None:
    watch, said = health()
    watch.left_out(7, ["deep/far.bin"])
    watch.succeeded(7)
    assert len(said) == 1 and said[0].message.startswith(LEFT_OUT) and "deep/far.bin" in said[0].message


def test_causes_name_what_went_wrong_without_the_step() -> None:
    slow = ClientError({"Error": {"Code": "SlowDown", "Message": "reduce"}}, "PutObject")
    wrapped = RemoteStoreError("s3://b/job/checkpoints/step-00000010/model.pt: SlowDown")
    wrapped.__cause__ = slow
    assert cause_of(wrapped) == "S3 answered SlowDown"
    unreachable = RemoteStoreError("s3://b/x: could not connect")
    unreachable.__cause__ = EndpointConnectionError(endpoint_url="http://s3")
    assert cause_of(unreachable) == "S3 could not be reached (EndpointConnectionError)"
    assert cause_of(OSError(errno.ENOSPC, "No space left on device")) == "no space left on device (ENOSPC)"
    assert cause_of(RemoteStoreError("x", cause=FailureCause.REWRITTEN)) \
        == "files rewritten while they were uploaded"


def test_a_long_run_of_failures_names_its_last_three_steps() -> None:
    watch, said = health()
    for step in range(10, 60, 10):
        watch.failed(step, "S3 answered SlowDown", urgent=False)
    assert "(steps 30, 40, 50)" in said[-1].message
