"""The final outputs of a finished job against a real S3 stand-in (moto server): kept under <job>/final/,
and when S3 refuses them (the bucket is gone, a file name S3 cannot take) the job still ends as it
finished, with a warning saying the files went with the instance, never a crash of the agent."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from spot_trainer.agent.node.keep_outputs import keep_final_outputs
from spot_trainer.agent.records.telemetry import RunTelemetry
from spot_trainer.storage.steps.remote import RemoteStore


def telemetry_for(aws_env: dict[str, str], bucket: str) -> RunTelemetry:
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    return RunTelemetry(store=RemoteStore(s3, bucket, "job"), cloud=None)


def finished_folder(root: Path) -> Path:
    (root / "checkpoint-400").mkdir(parents=True)
    (root / "checkpoint-400/trainer_state.json").write_text('{"global_step": 400}')
    (root / "model.safetensors").write_bytes(b"w" * 3_000_000)
    (root / "config.json").write_text("{}")
    return root


def test_kept_under_final_with_an_event_saying_where(aws_env: dict[str, str], bucket: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    telemetry = telemetry_for(aws_env, bucket)
    keep_final_outputs(telemetry, finished_folder(tmp_path))
    listed = telemetry.store.s3.list_objects_v2(Bucket=bucket, Prefix="job/final/")["Contents"]
    assert {(item["Key"], item["Size"]) for item in listed} == {("job/final/model.safetensors", 3_000_000),
                                                               ("job/final/config.json", 2)}
    (event,) = telemetry.store.events("final_outputs")
    assert (event["location"], event["files"], event["bytes"]) == (f"s3://{bucket}/job/final/", 2, 3_000_002)
    assert "final outputs: 2 files (3.0 MB)" in capsys.readouterr().err


@pytest.mark.parametrize("trouble", ["the bucket is gone", "a file name S3 cannot take"])
def test_a_refused_upload_is_a_warning_not_a_crash(aws_env: dict[str, str], bucket: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], trouble: str) -> None:
    folder = finished_folder(tmp_path)
    if trouble == "the bucket is gone":
        bucket = "spot-trainer-deleted-bucket"
    else:
        (folder / b"r\xe9sultats.txt".decode("utf-8", "surrogateescape")).write_text("0.91")
    keep_final_outputs(telemetry_for(aws_env, bucket), folder)  # returns: the job ends DONE
    assert f"WARNING: the command's final outputs in {folder} did not reach s3://{bucket}/job/final/" in \
        capsys.readouterr().err
