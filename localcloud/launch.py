"""An instance of the job's group launched as EC2 launches it: from the launch template the group names,
with its user data and its instance profile's role assumed for the instance, plus the agent's settings
the local spot cloud adds (a faster pace, the command's environment)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.fake_imds import RoleCredentials
from localcloud.images import ImageFacts
from localcloud.instance import Instance
from localcloud.roles import assume, instance_profile_role
from localcloud.run_options import RunOptions

# Time runs faster here: instance records and deadline checks every second or two, not every minute.
LOCAL_PACE = {"SPOT_HEARTBEAT_SECONDS": "2", "SPOT_DEADLINE_CHECK_SECONDS": "1", "SPOT_BUDGET_CHECK_SECONDS": "1"}
# Passed by localcloud/bin/systemctl to the agent: credentials (only an instance without a role has any;
# others get theirs from IMDS), and this instance's boot time and spot prices (on EC2 the agent reads
# those from /proc/uptime and the price history).
DEFAULT_PASSENV = "AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN SPOT_LAUNCHED_AT SPOT_PRICE_TRACE"


def instance_settings(options: RunOptions) -> dict[str, str]:
    """The agent's settings plus the command's environment, which the systemd stand-in passes to
    the agent (and so to the command) as names to pass through."""
    passed = " ".join([DEFAULT_PASSENV, *options.command_env])
    trace = {"SPOT_PRICE_TRACE": str(options.price_trace.resolve())} if options.price_trace else {}
    return {**LOCAL_PACE, **trace, **options.settings, **options.command_env, "SYSTEMCTL_PASSENV": passed}


@dataclass
class Launcher:
    cloud: LocalCloud
    image: ImageFacts | None = None  # instances play this image as it is (default: an env with torch)
    across_regions: bool = False  # a job of several regions: an instance reaches AWS through its region's proxy
    _templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # launch template data by version

    def launch(self, member: dict[str, Any], group: dict[str, Any], market: str, *, settings: dict[str, str],
               local_ipv4: str, region: str | None = None) -> Instance:
        """The group's `member` booted: its template's user data running in its own sandbox, in `region`
        (default: the local cloud's)."""
        iid = member["InstanceId"]
        template = self._template_data(member, group, region)
        if self.across_regions and region:
            aws_env = self.cloud.region_env(region)  # the other regions at their distance (region_proxy.py)
        else:
            aws_env = {**self.cloud.aws_env, **({"AWS_DEFAULT_REGION": region} if region else {})}
        instance = Instance(iid, member.get("InstanceType") or "c7i.xlarge", self.cloud.workdir / "instances" / iid,
                            aws_env, settings, local_ipv4=local_ipv4, market=market,
                            role=self._role(template, iid), image=self.image)
        return instance.launch(base64.b64decode(template["UserData"]).decode())

    def _template_data(self, member: dict[str, Any], group: dict[str, Any], region: str | None) -> dict[str, Any]:
        spec = member.get("LaunchTemplate") or group["MixedInstancesPolicy"]["LaunchTemplate"][
            "LaunchTemplateSpecification"]
        key = f"{region}:{spec['LaunchTemplateId']}:{spec.get('Version', '$Latest')}"
        if key not in self._templates:
            version = spec.get("Version") or "$Latest"
            found = self.cloud.client("ec2", region).describe_launch_template_versions(
                LaunchTemplateId=spec["LaunchTemplateId"], Versions=[version])["LaunchTemplateVersions"]
            self._templates[key] = found[0]["LaunchTemplateData"]
        return self._templates[key]

    def _role(self, template: dict[str, Any], instance_id: str) -> RoleCredentials | None:
        """The launch template's instance profile role, assumed for this instance as EC2 does."""
        profile = template.get("IamInstanceProfile") or {}
        if not (profile.get("Arn") or profile.get("Name")):
            return None
        role_arn = instance_profile_role(self.cloud.client("iam"), profile.get("Arn") or profile["Name"])
        return assume(self.cloud.client("sts"), role_arn, instance_id)
