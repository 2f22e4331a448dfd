"""An unmodified HF Trainer script on three nodes with `min_nodes = 2`, through the three ways a spot
node goes (a power-off of the publisher, of a non-publisher, a notice to one). Every rank writes
`checkpoint-<N>/`, but only global rank 0 writes the model into it: only the node holding rank 0
publishes, so every checkpoint in S3 holds the model, each step is published once, the job ends DONE
with no lost node taken for a failure, and its last checkpoint loads with `from_pretrained`."""

from __future__ import annotations

import sys
from pathlib import Path

from transformers import GPT2LMHeadModel

from tests.integration.lost_nodes import (
    TIMEOUT,
    every_node_finishes,
    lose_each_kind_of_node,
    no_lost_node_was_a_failure,
)
from tests.integration.test_multinode import cluster, job_store

pytestmark = TIMEOUT

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/hf_own_folder/train.py"
STEPS, SAVE_EVERY = 300, 50  # the script saves every 50 steps; the third loss comes by about step 200


def test_an_unmodified_hf_trainer_survives_every_kind_of_lost_node_and_publishes_only_whole_checkpoints(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-hf-{bucket[-8:]}"
    store = job_store(aws_env, bucket, job)
    with cluster(aws_env, bucket, job, tmp_path, folder="outputs", command=f"{sys.executable} {SCRIPT} {STEPS}",
                 restart_budget="1", grace_seconds="10") as group:
        lose_each_kind_of_node(group, store, first=SAVE_EVERY, gap=SAVE_EVERY)
        every_node_finishes(group, store)
    assert store.get_json("status.json")["state"] == "DONE"
    no_lost_node_was_a_failure(group)
    listed = store.s3.list_objects_v2(Bucket=bucket, Prefix=store.key("checkpoints/"))["Contents"]
    steps = sorted({key.split("/")[2] for item in listed if (key := item["Key"]).count("/") >= 3})
    assert steps, listed
    for step in steps:  # restore reads what the MANIFEST lists, whoever wrote last
        manifest = store.get_json(f"checkpoints/{step}/MANIFEST.json")
        assert "model.safetensors" in str(manifest), (step, manifest)
    # An offer of a step S3 already holds is refused before any byte is sent: published is False.
    uploads = [event["step"] for event in store.events("checkpoint") if event["published"]]
    assert sorted(uploads) == sorted(set(uploads)), f"one node publishes each step, not {uploads}"
    restored = store.restore_at_or_below(tmp_path / "restored", store.latest_step())
    assert restored is not None
    GPT2LMHeadModel.from_pretrained(restored)  # the published checkpoint loads in its framework
