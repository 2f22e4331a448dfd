"""`make demo` as a user runs it: the whole command, its report, and nothing left running after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.cloud import WORK_ROOT
from localcloud.instance import Instance


@pytest.mark.slow
def test_demo_finishes_reports_and_leaves_nothing_running(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", "--job", "example", "--json", str(report_file)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["state"] == "DONE" and report["steps"] == report["total_steps"] == 40
    assert report["interruptions"] == 3 and report["completed_steps_lost"] == 0
    assert "job example: DONE" in done.stderr and "bucket" in done.stderr and "kept" in done.stderr
    run_dir = max((WORK_ROOT / "runs").glob("example-*"))  # named by start time
    roots = [root for root in (run_dir / "instances").glob("i-*") if root.is_dir()]
    instances = [Instance(root.name, "", root, {}) for root in roots]
    assert len(instances) == 4 and all(instance.processes() == [] for instance in instances)
