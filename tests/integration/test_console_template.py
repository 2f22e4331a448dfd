"""The console path in one command: the runtime's wheel lands in the user's bucket and the template,
without assets, names it as the TrainerPackage default and lets the instance role read exactly it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3

from localcloud.moto_server import MotoServer
from stacks.instance.runtime_wheel import REPO_ROOT, runtime_wheel


def console_template(moto_server: MotoServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **moto_server.env(), "AWS_EC2_METADATA_DISABLED": "true"}
    return subprocess.run([sys.executable, "-m", "stacks.console_template", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_one_command_publishes_the_runtime_and_writes_a_template_that_names_it(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=moto_server.endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="my-artifacts")
    done = console_template(moto_server, "--job", "cifar", "--bucket", "my-artifacts", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (key,) = [item["Key"] for item in s3.list_objects_v2(Bucket="my-artifacts")["Contents"]]
    assert s3.get_object(Bucket="my-artifacts", Key=key)["Body"].read() == runtime_wheel().read_bytes()
    template = json.loads((tmp_path / "SpotTrainer-cifar.template.json").read_text())
    assert template["Parameters"]["TrainerPackage"]["Default"] == f"s3://my-artifacts/{key}"
    assert not [name for name in template["Parameters"] if name.startswith("AssetParameters")]
    assert f"my-artifacts/{key}" in json.dumps(template["Resources"]), "the instance role may read the wheel"


def test_a_bucket_it_cannot_write_is_one_line(moto_server: MotoServer, tmp_path: Path) -> None:
    done = console_template(moto_server, "--job", "cifar", "--bucket", "no-such-bucket-here", "--out", str(tmp_path))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("--bucket no-such-bucket-here: cannot upload the runtime")
    assert "Traceback" not in done.stderr
