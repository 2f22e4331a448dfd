"""An unmodified HF Trainer script on two nodes: every rank writes `checkpoint-<N>/`, but only global
rank 0 writes the model into it. Only the node holding rank 0 publishes, so every checkpoint in S3
holds the model and loads with `from_pretrained`."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
from transformers import GPT2LMHeadModel

from spot_trainer.storage.remote import RemoteStore
from tests.integration.test_multinode import cluster

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/hf_own_folder/train.py"
STEPS, SAVE_EVERY = 100, 50  # the script saves every 50 steps


def test_every_checkpoint_two_nodes_publish_holds_the_model(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-hf-{bucket[-8:]}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with cluster(aws_env, bucket, job, tmp_path, nodes=2, folder="outputs", min_nodes="2", max_nodes="2",
                 command=f"{sys.executable} {SCRIPT} {STEPS}") as group:
        for agent in group.agents:
            assert agent.wait(timeout=300) == 0, agent.text()
    assert store.get_json("status.json")["state"] == "DONE"
    listed = store.s3.list_objects_v2(Bucket=bucket, Prefix=store.key("checkpoints/"))["Contents"]
    steps = sorted({key.split("/")[2] for item in listed if (key := item["Key"]).count("/") >= 3})
    assert steps, listed
    for step in steps:  # restore reads what the MANIFEST lists, whoever wrote last
        manifest = store.get_json(f"checkpoints/{step}/MANIFEST.json")
        assert "model.safetensors" in str(manifest), (step, manifest)
    uploads = [event["step"] for event in store.events("checkpoint")]
    assert sorted(uploads) == sorted(set(uploads)), f"one node publishes each step, not {uploads}"
    restored = store.restore_at_or_below(tmp_path / "restored", store.latest_step())
    assert restored is not None
    GPT2LMHeadModel.from_pretrained(restored)  # the published checkpoint loads in its framework
