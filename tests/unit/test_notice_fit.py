"""A grace period longer than a spot notice deploys (scale-in and rebalancing wait for it) and the synth
says in one line what a notice leaves of it."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from app import build_app
from stacks.job.spec import JOBS_DIR
from tests.unit.stack_support import CDK_JSON_CONTEXT


@pytest.mark.parametrize(("grace", "warned"), [(110, False), (117, False), (300, True)])
def test_a_grace_period_a_notice_cannot_hold_is_a_warning_at_synth(
    grace: int, warned: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "long.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace("grace_seconds = 60", f"grace_seconds = {grace}"))
    build_app(cdk.App(context={**CDK_JSON_CONTEXT, "job": str(job)}, outdir=str(tmp_path / "out")))
    lines = [line for line in capsys.readouterr().err.splitlines() if "WARNING" in line and "grace_seconds" in line]
    assert len(lines) == int(warned)
    if warned:
        assert "cannot fit in a spot notice" in lines[0] and "scale-in and rebalancing" in lines[0]
