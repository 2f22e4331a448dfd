"""The template for the CloudFormation console, in one command: the runtime's wheel goes to a bucket of
yours, and the template (without assets, which only `cdk deploy` can publish) names it as the
TrainerPackage default. Uses your AWS credentials and region, as the aws CLI does.

    python -m stacks.console_template --job cifar --bucket my-artifacts
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError

from spot_trainer.aws_names import bucket_name_problem
from stacks.help_text import first_paragraph
from stacks.instance.runtime_wheel import REPO_ROOT, runtime_wheel

KEY_PREFIX = "spot-trainer/"


def publish_runtime(bucket: str) -> str:
    """Upload this checkout's wheel under its content hash (a re-run uploads nothing new); its s3:// URI."""
    wheel = runtime_wheel()
    key = f"{KEY_PREFIX}{hashlib.sha256(wheel.read_bytes()).hexdigest()}.whl"
    try:
        boto3.client("s3").upload_file(str(wheel), bucket, key)
    except (BotoCoreError, ClientError, S3UploadFailedError) as error:
        raise SystemExit(f"--bucket {bucket}: cannot upload the runtime there: {error}") from None
    return f"s3://{bucket}/{key}"


def synth_for_console(job: str, package: str, out: Path) -> Path:
    """`cdk synth` with the runtime named in S3: no asset, so the template uploads as it is."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    done = subprocess.run(["npx", "--no-install", "cdk", "synth", "-c", f"job={job}", "-c",
                           f"trainer_package={package}", "-o", str(out), "--quiet"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        ours = [line for line in done.stderr.splitlines() if line.startswith("spot-trainer: ")]
        raise SystemExit((ours or done.stderr.strip().splitlines() or ["cdk synth failed"])[-1])
    (template,) = out.glob("*.template.json")
    return template


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stacks.console_template", description=first_paragraph(__doc__))
    parser.add_argument("--job", required=True, help="a job name (jobs/NAME.toml) or a job file's path")
    parser.add_argument("--bucket", required=True, help="an S3 bucket of yours for the runtime's wheel")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "cdk.out", help="where the template goes")
    options = parser.parse_args(argv)
    if problem := bucket_name_problem(options.bucket):
        parser.error(f"--bucket {problem}")
    package = publish_runtime(options.bucket)
    template = synth_for_console(options.job, package, options.out)
    print(f"runtime: {package}\ntemplate: {template} (upload it in the CloudFormation console)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
