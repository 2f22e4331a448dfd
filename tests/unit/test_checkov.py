"""checkov, an IaC scanner independent of cdk-nag, on every job's synthesized template: no failed check,
and each skip carries its reason in the template (stacks/resources/nag_suppressions.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.stack_support import JOBS, Synthesized

ROOT = Path(__file__).resolve().parents[2]
# checkov's pins conflict with requirements-dev.txt, so it lives in a venv of its own (see the Makefile).
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
NO_COMMENT = "No comment provided"  # what checkov reports for a skip whose Metadata has no comment

Check = dict[str, Any]


def run_checkov(templates: list[Path]) -> dict[str, Any]:
    """One run over all templates: checkov's start-up costs seconds, a template a fraction of one."""
    if not CHECKOV.exists():
        pytest.fail(f"checkov is missing at {CHECKOV}: `make test` installs it (or `make .venv-checkov/.installed`, "
                    "from requirements-checkov.txt)", pytrace=False)
    # Offline and reproducible: no update check on PyPI, no download of guidelines from the platform.
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
    # No --quiet: with JSON output it drops the skipped checks, whose reasons are asserted here.
    command = [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--skip-download",
               "--file", *map(str, templates)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov exited {result.returncode} without a JSON report:\n{result.stdout}\n{result.stderr}")
    return report


def by_template(checks: list[Check]) -> dict[Path, list[Check]]:
    grouped: dict[Path, list[Check]] = {}
    for check in checks:
        grouped.setdefault(Path(check["file_abs_path"]).resolve(), []).append(check)
    return grouped


def describe(check: Check) -> str:
    return f"{check['check_id']} on {check['resource']}: {check['check_name']}"


@pytest.fixture(scope="module")
def results(synthesized: dict[str, Synthesized]) -> dict[str, dict[str, list[Check]]]:
    """Per job: checkov's passed, failed and skipped checks on its template."""
    templates = {job: next(synthesized[job].outdir.glob("*.template.json")).resolve() for job in JOBS}
    report = run_checkov(list(templates.values()))
    assert report.get("check_type") == "cloudformation", report
    assert report["summary"]["parsing_errors"] == 0, report["results"]["parsing_errors"]
    outcomes = {kind: by_template(report["results"][f"{kind}_checks"]) for kind in ("passed", "failed", "skipped")}
    return {job: {kind: checks.get(path, []) for kind, checks in outcomes.items()} for job, path in templates.items()}


@pytest.mark.parametrize("job", JOBS)
def test_checkov_scanned_the_template(results: dict[str, dict[str, list[Check]]], job: str) -> None:
    assert results[job]["passed"], f"checkov ran no check on {job}'s template"


@pytest.mark.parametrize("job", JOBS)
def test_checkov_has_no_failed_check(results: dict[str, dict[str, list[Check]]], job: str) -> None:
    failed = [describe(check) for check in results[job]["failed"]]
    assert not failed, ("checkov failed checks: fix each, or skip it with its reason via skip_checkov "
                        "(stacks/resources/nag_suppressions.py):\n" + "\n".join(failed))


@pytest.mark.parametrize("job", JOBS)
def test_every_checkov_skip_has_a_reason(results: dict[str, dict[str, list[Check]]], job: str) -> None:
    unexplained = [describe(check) for check in results[job]["skipped"]
                   if check["check_result"].get("suppress_comment", "").strip() in ("", NO_COMMENT)]
    assert not unexplained, "checkov skips without a reason:\n" + "\n".join(unexplained)
