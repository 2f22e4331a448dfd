"""Secrets named in the job file: each reference checked in one line, and the instance role may read
exactly the named ones, by service, with the values nowhere in what synth makes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from spot_trainer.secret_refs import SecretRef, SecretRefError, parse_refs, refs_from_text, refs_text
from stacks.job.spec import JOBS_DIR, JobSpecError
from stacks.job_file import parse_job
from tests.unit.stack_support import synth, user_data_text

EXAMPLE = tomllib.loads((JOBS_DIR / "example.toml").read_text())
REFS = ["HF_TOKEN=ssm:/team/hf-token", "WANDB_API_KEY=secretsmanager:wandb/key", "PLAIN=ssm:flat"]


def test_references_read_and_travel_as_one_setting() -> None:
    refs = parse_refs(REFS)
    assert refs[0] == SecretRef("HF_TOKEN", "ssm", "/team/hf-token")
    assert refs[1] == SecretRef("WANDB_API_KEY", "secretsmanager", "wandb/key")
    assert refs_from_text(refs_text(refs)) == refs


@pytest.mark.parametrize(("entry", "message"), [
    ("HF_TOKEN", "'HF_TOKEN' is not \"NAME=ssm:/parameter/path\" or \"NAME=secretsmanager:secret-name\""),
    ("hf_token=ssm:/x", "'hf_token' is not an environment variable name (capitals, digits and _)"),
    ("CHECKPOINT_DIR=ssm:/x", "CHECKPOINT_DIR is set by the agent or AWS's tools; give the secret another name"),
    ("SPOT_X=ssm:/x", "SPOT_X is set by the agent or AWS's tools; give the secret another name"),
    ("TOKEN=vault:/x", "'TOKEN=vault:/x': the source is 'vault'; give ssm: or secretsmanager:"),
    ("TOKEN=ssm:/a b", "'TOKEN=ssm:/a b': '/a b' is not a ssm name"),
])
def test_a_bad_reference_is_one_line_naming_it(entry: str, message: str) -> None:
    data = {**EXAMPLE, "run": {**EXAMPLE["run"], "secrets": [entry]}}
    with pytest.raises(JobSpecError) as caught:
        parse_job(data, JOBS_DIR / "example.toml")
    assert str(caught.value).endswith(f"run.secrets: {message}"), str(caught.value)


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(SecretRefError, match="A is named twice"):
        parse_refs(["A=ssm:/x", "A=secretsmanager:y"])


def test_the_role_reads_exactly_the_named_secrets(tmp_path: Path) -> None:
    job = tmp_path / "secrets.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace(
        'grace_seconds = 60', f'grace_seconds = 60\nsecrets = {json.dumps(REFS)}'))
    stack = synth(str(job), tmp_path / "out")
    policy = next(p for p in stack.resources("AWS::IAM::Policy").values()
                  if any(s.get("Sid") == "JobCheckpoints" for s in p["Properties"]["PolicyDocument"]["Statement"]))
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}

    def arn(service: str, rest: str) -> dict[str, list[object]]:
        return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":{service}:", {"Ref": "AWS::Region"}, ":",
                                  {"Ref": "AWS::AccountId"}, rest]]}

    assert statements["JobParameters"]["Action"] == "ssm:GetParameter"
    found = sorted(json.dumps(r) for r in statements["JobParameters"]["Resource"])
    assert found == sorted(json.dumps(arn("ssm", rest)) for rest in (":parameter/team/hf-token", ":parameter/flat"))
    assert statements["JobSecrets"]["Action"] == "secretsmanager:GetSecretValue"
    assert statements["JobSecrets"]["Resource"] == arn("secretsmanager", ":secret:wandb/key-??????")
    assert f"SPOT_SECRETS={','.join(REFS)}" in user_data_text(stack)
