"""The local spot cloud: moto as the AWS control plane and the job's stack deployed to it with the real
CDK CLI (synth, deploy on moto's default VPC with this checkout's trainer wheel, destroy). The
player (localcloud/player.py) then does EC2's part.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from localcloud.instance import REPO_ROOT
from localcloud.moto_server import MotoServer

WORK_ROOT = REPO_ROOT / ".localcloud"
ARTIFACT_BUCKET = "spot-trainer-local-artifacts"
CDK_ENV = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "AWS_EC2_METADATA_DISABLED": "true"}


class CloudError(RuntimeError):
    """The local cloud cannot go on (deploy failed, an instance's user data failed, time ran out)."""


def trainer_wheel(cache: Path = WORK_ROOT / "wheels") -> Path:
    """`pip wheel` of this checkout, rebuilt only when the package's sources change."""
    sources = sorted((REPO_ROOT / "trainer").rglob("*.py")) + [REPO_ROOT / "pyproject.toml"]
    named = (str(p.relative_to(REPO_ROOT)).encode() + p.read_bytes() for p in sources)
    digest = hashlib.sha256(b"".join(named)).hexdigest()[:16]
    directory = cache / digest
    built = list(directory.glob("spot_trainer-*.whl"))
    if built:
        return built[0]
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(directory),
         str(REPO_ROOT)], capture_output=True, text=True, cwd=directory)
    if result.returncode != 0:
        raise CloudError(f"cannot build the trainer wheel: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    return next(directory.glob("spot_trainer-*.whl"))


@dataclass
class Deployment:
    job: str
    stack: str
    bucket: str
    group: str
    app_dir: Path


@dataclass
class LocalCloud:
    """moto on 127.0.0.1 plus the CDK CLI pointed at it. Use as a context manager: stop() always runs."""

    workdir: Path
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    moto: MotoServer | None = None

    def start(self) -> LocalCloud:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.moto = MotoServer(log_path=self.workdir / "moto.log").start()
        return self

    def stop(self) -> None:
        if self.moto is not None:
            self.moto.stop()

    def __enter__(self) -> LocalCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- AWS clients -----------------------------------------------------------------------------
    @property
    def aws_env(self) -> dict[str, str]:
        assert self.moto is not None, "start() first"
        return self.moto.env()

    def client(self, service: str) -> Any:
        env = self.aws_env
        return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            aws_session_token=env["AWS_SESSION_TOKEN"])

    # ---- the stack -----------------------------------------------------------------------------
    def synth(self, job: str, app_dir: Path | None = None) -> Path:
        app_dir = app_dir or self.workdir / f"cdk.out-{job}"
        self._cdk(["synth", "-c", f"job={job}", "-o", str(app_dir), "--quiet"], "synth")
        return app_dir

    def publish_trainer(self) -> str:
        wheel = trainer_wheel()
        s3 = self.client("s3")
        s3.create_bucket(Bucket=ARTIFACT_BUCKET)
        key = "assets/" + hashlib.sha256(wheel.read_bytes()).hexdigest() + ".whl"
        s3.upload_file(str(wheel), ARTIFACT_BUCKET, key)
        return f"s3://{ARTIFACT_BUCKET}/{key}"

    def default_network(self) -> tuple[str, list[str]]:
        ec2 = self.client("ec2")
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        return vpc, sorted(s["SubnetId"] for s in subnets)[:2]

    def deploy(self, job: str, app_dir: Path, parameters: dict[str, str] | None = None) -> Deployment:
        """`cdk deploy` of the synthesized app, on moto's default VPC, with this checkout's trainer."""
        vpc, subnets = self.default_network()
        values = {"VpcId": vpc, "Subnets": ",".join(subnets), "TrainerPackage": self.publish_trainer(),
                  **(parameters or {})}
        args = ["deploy", "--app", str(app_dir), "-c", f"job={job}", "--require-approval", "never",
                "--method=direct", "--no-previous-parameters"]
        for name, value in values.items():
            args += ["--parameters", f"{name}={value}"]
        self._cdk(args, "deploy")
        stack = f"SpotTrainer-{job}"
        outputs = self.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        by_key = {o["OutputKey"]: o["OutputValue"] for o in outputs}
        return Deployment(job=job, stack=stack, bucket=by_key["CheckpointBucket"],
                          group=by_key["AutoScalingGroup"], app_dir=app_dir)

    def destroy(self, deployment: Deployment) -> None:
        args = ["destroy", "--app", str(deployment.app_dir), "-c", f"job={deployment.job}", "--force"]
        self._cdk(args, "destroy")

    def _cdk(self, args: list[str], what: str) -> None:
        env = {**os.environ, **CDK_ENV, **(self.aws_env if self.moto else {})}
        log_path = self.workdir / f"cdk-{what}.log"
        with open(log_path, "w") as out:
            # Its own process group: on Ctrl-C or an error, npx, node and the synth all go together.
            process = subprocess.Popen(["npx", "cdk", *args], env=env, cwd=REPO_ROOT, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                returncode = process.wait()
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        if returncode != 0:
            lines = [line for line in log_path.read_text().splitlines() if line.strip()]
            errors = [line for line in lines if "❌" in line or "Error" in line]
            reason = (errors or lines or ["?"])[-1]
            raise CloudError(f"cdk {what} failed: {reason.strip()} (full output: {log_path})")
