"""What a finished command leaves beside its checkpoints is what outlives the instance, and `status`
says where it went."""

from __future__ import annotations

import json
from pathlib import Path

from spot_trainer.agent.records.status import describe_job
from spot_trainer.storage.s3.latest_record import LatestRecord
from spot_trainer.storage.saves.final_outputs import final_output_files


def test_the_final_model_and_logs_count_and_no_checkpoint_of_any_layout_does(tmp_path: Path) -> None:
    for name in ("model.safetensors", "config.json", "runs/events.out.tfevents.1", "model_final.pt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "checkpoint-400").mkdir()  # HF
    (tmp_path / "checkpoint-400/trainer_state.json").write_text(json.dumps({"global_step": 400}))
    for checkpoint in ("step-00000400", "epoch=3-step=400.ckpt", "last.ckpt", "model_step400.pt"):
        (tmp_path / checkpoint).write_bytes(b"x")
    for in_progress in (".tmp-step-00000500", ".upload-checkpoint-400/model.bin", "runs/.partial"):
        (tmp_path / in_progress).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / in_progress).write_bytes(b"x")
    assert sorted(final_output_files(tmp_path)) == [
        "config.json", "model.safetensors", "model_final.pt", "runs/events.out.tfevents.1"]


def test_a_folder_that_is_gone_leaves_nothing(tmp_path: Path) -> None:
    assert final_output_files(tmp_path / "never-made") == {}


def test_status_says_where_the_final_outputs_went() -> None:
    events = [{"kind": "done", "step": 400},
              {"kind": "final_outputs", "location": "s3://b/hf/final/", "files": 4, "bytes": 2_500_000}]
    text = describe_job({"job": "hf", "state": "DONE"}, LatestRecord(400), events)
    assert "final outputs  s3://b/hf/final/ (4 files, 2.5 MB)" in text.splitlines()
    assert "final outputs" not in describe_job({"job": "hf", "state": "DONE"}, LatestRecord(400), events[:1])


def test_checkpoints_nested_in_a_run_folder_and_links_out_of_the_folder_are_no_outputs(tmp_path: Path) -> None:
    (tmp_path / "run1/checkpoint-400").mkdir(parents=True)  # HF output_dir="outputs/run1"
    (tmp_path / "run1/checkpoint-400/model.safetensors").write_bytes(b"x")
    (tmp_path / "run1/model.safetensors").write_bytes(b"x")
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset/shard-0.bin").write_bytes(b"x")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/data").symlink_to(tmp_path / "dataset")
    (tmp_path / "out/weights.bin").symlink_to(tmp_path / "dataset/shard-0.bin")
    assert sorted(final_output_files(tmp_path / "out")) == []
    assert sorted(final_output_files(tmp_path / "run1")) == ["model.safetensors"]
