"""Records in S3 that do not hold what they say: the agent names them and goes by what S3 really holds,
so nothing is said to be safe that is not, and no step trained again is dropped."""

from __future__ import annotations

from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.agent_runner import AgentProcess, agent_env


def test_a_latest_record_naming_a_damaged_step_is_repointed_and_later_steps_publish(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = "fell-back"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    for step in (10, 20):
        saved = tmp_path / "before" / f"ckpt_{step}.pt"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_bytes(b"weights %d" % step)
        assert store.upload(saved, step) is UploadOutcome.PUBLISHED
    # Step 20's bytes are not what its manifest says: latest.json names a step no restore can use.
    store.s3.put_object(Bucket=bucket, Key=store.step_prefix(20) + "ckpt_20.pt", Body=b"torn")
    command = 'ls "$CHECKPOINT_DIR"; echo w > "$CHECKPOINT_DIR/ckpt_15.pt"; sleep 1; exit 0'
    with FakeImds(instance_id="i-fell-back") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-fell-back", command=command)).start()
        agent.run_to_the_end(timeout=120)
    assert "ckpt_10.pt" in agent.lines, agent.text()  # restored the newest step that verifies
    assert "spot-trainer: latest.json named step 20, which could not be restored: it now names step 10" \
        in agent.lines, agent.text()
    assert store.latest_step() == 15, "the step trained again is published, not dropped under a floor of 20"
    assert store.get_json("status.json")["state"] == "DONE"
