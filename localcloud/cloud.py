"""The local spot cloud: moto as the AWS control plane and the job's stack deployed to it with the real
CDK CLI (synth, deploy on moto's default VPC with this checkout's trainer wheel, destroy). The
player (localcloud/player.py) then does EC2's part.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from localcloud.instance import REPO_ROOT
from localcloud.moto_server import DUMMY_CREDENTIALS, MotoServer
from localcloud.region_link import CrossRegionLink
from localcloud.region_proxy import RegionProxy
from localcloud.served import Served
from spot_trainer.aws_names import job_of_stack

WORK_ROOT = REPO_ROOT / ".localcloud"
TOOLKIT_STACK = "CDKToolkit"
LOCAL_IMAGE_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
CDK_ENV = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "AWS_EC2_METADATA_DISABLED": "true"}
# Nothing listens on the discard port: a CLI call to AWS before moto runs fails at once, never reaching AWS.
OFFLINE_AWS = {**DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}


class CloudError(RuntimeError):
    """The local cloud cannot go on (deploy failed, an instance's user data failed, time ran out)."""


class JobRefused(CloudError):
    """`cdk synth` refused the job file; the message is the app's own line naming the field."""


def synthesized_stacks(app_dir: Path) -> list[dict[str, Any]]:
    """Every stack of a synthesized app, home first: its name, region (None: the deploy's) and template body."""
    manifest = json.loads((app_dir / "manifest.json").read_text())
    found = []
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") == "aws:cloudformation:stack":
            body = json.loads((app_dir / artifact["properties"]["templateFile"]).read_text())
            region = str(artifact.get("environment", "")).rsplit("/", 1)[-1]
            found.append({"stack": artifact.get("displayName", name), "body": body,
                          "region": None if region in ("", "unknown-region") else region})
    if not found:
        raise CloudError(f"no stack in {app_dir}")
    return sorted(found, key=lambda stack: len(str(stack["stack"])))  # SpotTrainer-<job> before -<job>-<region>


def synthesized_template(app_dir: Path) -> dict[str, Any]:
    """The job's home stack of a synthesized app: its name and template body."""
    return synthesized_stacks(app_dir)[0]


@dataclass
class Deployment:
    job: str
    stack: str
    bucket: str
    group: str
    app_dir: Path
    region: str = "us-east-1"
    others: tuple[Deployment, ...] = ()  # a job of several regions: the other regions' stacks, home's first

    def every_region(self) -> tuple[Deployment, ...]:
        """Home's deployment, then the other regions'."""
        return (self, *self.others)


@dataclass
class LocalCloud(Served):
    """moto on 127.0.0.1 plus the CDK CLI pointed at it. Use as a context manager: stop() always runs."""

    workdir: Path
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    moto: MotoServer | None = None
    link: CrossRegionLink = field(default_factory=CrossRegionLink)  # between regions: latency and bandwidth
    proxies: dict[str, RegionProxy] = field(default_factory=dict)  # region → its network (region_env)

    def start(self) -> LocalCloud:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.moto = MotoServer(log_path=self.workdir / "moto.log", iam_decisions=self.iam_decisions,
                               capacity_board=self.capacity_board).start()
        return self

    @property
    def capacity_board(self) -> Path:
        """Each region's spot capacity and placement score as moto answers them (localcloud/region_capacity.py);
        until a run writes it, capacity everywhere."""
        return self.workdir / "capacity-board.json"

    @property
    def iam_decisions(self) -> Path:
        """Every call made with a role's credentials and IAM's decision on it (localcloud/moto_iam.py)."""
        return self.workdir / "iam-decisions.jsonl"

    def stop(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()
        if self.moto is not None:
            self.moto.stop()

    # ---- AWS clients -----------------------------------------------------------------------------
    @property
    def aws_env(self) -> dict[str, str]:
        assert self.moto is not None, "start() first"
        return self.moto.env()

    def region_env(self, region: str) -> dict[str, str]:
        """What a client inside `region` (an instance of a job of several regions) talks to AWS through: that
        region's proxy, which plays the latency and bandwidth to the other regions (localcloud/region_proxy.py)."""
        assert self.moto is not None, "start() first"
        if region not in self.proxies:
            self.proxies[region] = RegionProxy(region, self.moto.port, self.link).start()
        return {**self.aws_env, "AWS_ENDPOINT_URL": self.proxies[region].endpoint, "AWS_DEFAULT_REGION": region}

    def client(self, service: str, region: str | None = None) -> Any:
        env = self.aws_env
        return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"],
                            region_name=region or env["AWS_DEFAULT_REGION"],
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            aws_session_token=env["AWS_SESSION_TOKEN"])

    # ---- the stack -----------------------------------------------------------------------------
    def synth(self, job: str, app_dir: Path | None = None) -> Path:
        """`cdk synth -c job=<name or path>` into the run's directory. It needs no AWS: before start(),
        any AWS call of the CLI's goes to a closed port and fails at once, credentials or not."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        app_dir = app_dir or self.workdir / f"cdk.out-{Path(job).stem}"
        self._cdk(["synth", "-c", f"job={job}", "-o", str(app_dir), "--quiet"], "synth")
        return app_dir

    def default_network(self, region: str | None = None) -> tuple[str, list[str]]:
        ec2 = self.client("ec2", region)
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        return vpc, sorted(s["SubnetId"] for s in subnets)[:2]

    def deploy(self, app_dir: Path, parameters: dict[str, str] | None = None) -> Deployment:
        """`cdk deploy` of the synthesized app, on moto's default VPC when the job picks its network at
        deploy time. The runtime is the one the stack ships (this checkout's wheel, an asset), as on AWS. A job
        of several regions: every region's stack, each in its region (home's deploy brings the others first)."""
        stacks = synthesized_stacks(app_dir)
        home = stacks[0]
        if any(path.name.startswith("asset.") for path in app_dir.iterdir()):
            for region in {stack["region"] for stack in stacks}:
                self.bootstrap(region)  # the runtime (or the job's code) ships as an asset: `cdk deploy` publishes it
        args = ["deploy", "--app", str(app_dir), str(home["stack"]), "--require-approval", "never",
                "--method=direct", "--no-previous-parameters"]
        for stack in stacks:  # each region's own network and image; a job of one region names no stack
            declared: dict[str, Any] = stack["body"].get("Parameters", {})
            vpc, subnets = self.default_network(stack["region"])
            values = {"VpcId": vpc, "Subnets": ",".join(subnets), **self.image_overrides(declared, stack["region"]),
                      **(parameters or {})}
            prefix = f"{stack['stack']}:" if len(stacks) > 1 else ""
            args += [arg for name, value in values.items() if name in declared
                     for arg in ("--parameters", f"{prefix}{name}={value}")]
        self._cdk(args, "deploy")
        home_stack = str(home["stack"])
        job = job_of_stack(home_stack) or home_stack  # the job's name: its S3 prefix, log group and settings
        found = [self._deployed(job, str(stack["stack"]), stack["region"], app_dir) for stack in stacks]
        return dataclasses.replace(found[0], others=tuple(found[1:]))

    def _deployed(self, job: str, stack: str, region: str | None, app_dir: Path) -> Deployment:
        region = region or self.aws_env["AWS_DEFAULT_REGION"]
        outputs = self.client("cloudformation", region).describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        by_key = {o["OutputKey"]: o["OutputValue"] for o in outputs}
        return Deployment(job=job, stack=stack, bucket=by_key["CheckpointBucket"], group=by_key["AutoScalingGroup"],
                          app_dir=app_dir, region=region)

    def bootstrap(self, region: str | None = None) -> None:
        """The CDK toolkit stack (its asset bucket) of a region, as `cdk bootstrap` would create it. The
        template is the CLI's own (`--show-template`); it is created directly because moto leaves a stack
        created through a change set, as `cdk bootstrap` does, without its outputs, which `cdk deploy` reads."""
        cloudformation = self.client("cloudformation", region)
        if any(s["StackName"] == TOOLKIT_STACK for s in cloudformation.describe_stacks()["Stacks"]):
            return
        template = self.workdir / "bootstrap-template.yaml"
        if not template.is_file():
            self._cdk(["bootstrap", "--show-template"], "bootstrap", output=template)
        cloudformation.create_stack(StackName=TOOLKIT_STACK, TemplateBody=template.read_text(),
                                    Capabilities=["CAPABILITY_NAMED_IAM"])
        self.log(f"bootstrapped the local account for assets (CDKToolkit{f' in {region}' if region else ''})")

    def image_overrides(self, declared: dict[str, Any], region: str | None = None) -> dict[str, str]:
        """AWS publishes AMI ids as public SSM parameters (the Deep Learning AMI's among them); moto knows
        only a few and reserves the /aws/ names. An image parameter whose public parameter moto lacks
        is pointed at moto's Amazon Linux one: every local instance runs the same, whatever its image."""
        ssm, overrides = self.client("ssm", region), {}
        for name, spec in declared.items():
            path = spec.get("Default")
            if not str(spec.get("Type", "")).startswith("AWS::SSM::Parameter::Value") or not path:
                continue
            try:
                ssm.get_parameter(Name=path)
            except ssm.exceptions.ParameterNotFound:
                overrides[name] = LOCAL_IMAGE_PARAMETER
                self.log(f"{name}: moto has no {path}; using {LOCAL_IMAGE_PARAMETER}")
        return overrides

    def destroy(self, deployment: Deployment) -> None:
        """The job's stacks, every region's (`--all` of its app)."""
        which = ["--all"] if deployment.others else [deployment.stack]
        self._cdk(["destroy", "--app", str(deployment.app_dir), *which, "--force"], "destroy")

    def _cdk(self, args: list[str], what: str, output: Path | None = None) -> None:
        """Run the CDK CLI; its log goes to cdk-<what>.log, its stdout to `output` when given."""
        env = {**os.environ, **CDK_ENV, **(self.aws_env if self.moto else OFFLINE_AWS)}
        log_path = self.workdir / f"cdk-{what}.log"
        with open(log_path, "w") as log, open(output or os.devnull, "w") as stdout:
            # Its own process group: on Ctrl-C or an error, npx, node and the synth all go together.
            process = subprocess.Popen(["npx", "cdk", *args], env=env, cwd=REPO_ROOT,
                                       stdout=log if output is None else stdout, stderr=log,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                returncode = process.wait()
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        if returncode != 0:
            lines = [line for line in log_path.read_text().splitlines() if line.strip()]
            # The app's own one-line verdict (a job file field) says more than the CLI's exit status.
            ours = [line.removeprefix("spot-trainer: ") for line in lines if line.startswith("spot-trainer: ")]
            errors = [line for line in lines if "❌" in line or "Error" in line]
            if ours and what == "synth":
                raise JobRefused(ours[-1].strip())
            reason = (ours or errors or lines or ["?"])[-1]
            raise CloudError(f"cdk {what} failed: {reason.strip()} (full output: {log_path})")
