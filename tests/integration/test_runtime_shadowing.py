"""A job's own files named like the runtime (`trainer.py`, `trainer/`, even `spot_trainer/`) cannot take
its place: the agent and the built-in trainer it starts still run, from the job's own directory."""

from __future__ import annotations

from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

# Each impostor leaves a mark and fails, so being imported instead of the runtime cannot go unnoticed.
IMPOSTOR = "import pathlib; pathlib.Path(__file__).with_name('hijacked-by-' + __name__).touch(); raise SystemExit(9)\n"
IMPOSTORS = ("trainer.py", "trainer/__init__.py", "trainer/__main__.py", "spot_trainer.py",
             "spot_trainer/__init__.py", "spot_trainer/__main__.py")
TRAIN_ARGS = "--model lm --synthetic --steps 12 --width 16 --context 16 --batch-size 4 --checkpoint-every-steps 4"


def job_directory_full_of_impostors(root: Path) -> Path:
    for name in IMPOSTORS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(IMPOSTOR)
    return root


def test_files_named_like_the_runtime_in_the_workdir_change_nothing(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    workdir = job_directory_full_of_impostors(tmp_path / "work")
    env = agent_env(aws_env, bucket=bucket, job="shadow", checkpoint_dir=tmp_path / "ckpt", imds_url="",
                    instance_id="i-shadow", command="builtin", workdir=str(workdir), train_args=TRAIN_ARGS)
    with FakeImds(instance_id="i-shadow") as imds:
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url
        # The harshest case: the agent itself started from inside the job's directory.
        agent = AgentProcess(env, cwd=workdir).start()
        try:
            code = agent.wait()
        finally:
            agent.stop()
    assert code == 0, agent.text()
    assert sorted(p.name for p in workdir.rglob("hijacked-by-*")) == []
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "shadow")
    assert store.get_json("status.json")["state"] == "DONE" and store.latest_step() == 12
