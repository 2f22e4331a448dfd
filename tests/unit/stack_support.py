"""Synthesize a job's stack in-process, with cdk.json's context (its feature flags) as the CLI passes it:
cdk.App does not read cdk.json itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from app import build_app

REPO = Path(__file__).resolve().parents[2]
JOBS = sorted(p.stem for p in (REPO / "jobs").glob("*.toml"))
CDK_JSON_CONTEXT: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    template: Template
    raw: dict[str, Any]
    outdir: Path

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.raw["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str) -> dict[str, Any]:
        (found,) = self.resources(kind).values()
        return found["Properties"]

    def condition_of(self, logical_id: str) -> str:
        return str(self.raw["Resources"][logical_id]["Condition"])

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())


def synth(job: str, outdir: Path, **context: Any) -> Synthesized:
    app = cdk.App(context={**CDK_JSON_CONTEXT, "job": job, **context}, outdir=str(outdir), analytics_reporting=False)
    stack = build_app(app)
    app.synth()
    raw = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    return Synthesized(Template.from_json(raw), raw, outdir)


def user_data_text(synth: Synthesized, placeholder: str = "<TOKEN>") -> str:
    """The launch template's user data with every intrinsic replaced by a placeholder."""
    user_data = synth.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    if isinstance(user_data, str):
        return user_data
    _, parts = user_data["Fn::Join"]
    return "".join(p if isinstance(p, str) else placeholder for p in parts)

