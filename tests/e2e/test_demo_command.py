"""`make demo` as a user runs it: the whole command, its report, and nothing left running after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

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
    # Beside the report, the picture of the job's life: a bar per instance, a mark per interruption.
    picture = ElementTree.parse(run_dir / "example.svg").getroot()
    ids = [element.get("id", "") for element in picture.iter()]
    bars = sorted(i.removeprefix("instance-") for i in ids if i.startswith("instance-"))
    assert bars == sorted(root.name for root in roots)
    assert len([i for i in ids if i.startswith("interruption-")]) == report["interruptions"]
    assert "step 40" in "".join("".join(e.itertext()) for e in picture.iter() if e.get("id") == "last-step")
    assert f"plot: {run_dir / 'example.svg'}: 4 instance(s)" in done.stderr


MULTINODE_ARGS = ("--model lm --synthetic --steps 150 --width 16 --context 16 --batch-size 12 "
                  "--checkpoint-every-steps 10 --log-every 5 --min-step-seconds 0.1")


@pytest.mark.slow
def test_three_nodes_as_one_survive_notices_and_a_hard_kill(tmp_path: Path) -> None:
    """Every instance its own 127.0.0.x and its own agent; the rendezvous in (moto's) S3."""
    report_file = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", "--job", "multinode", "--train-args",
                           MULTINODE_ARGS, "--interruptions", "2", "--hard-kill", "1", "--json", str(report_file)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["state"] == "DONE" and report["steps"] == report["total_steps"] == 150
    # A notice costs no step; a power-off at most the steps since the last checkpoint (every 10), and only
    # when the node held rank 0.
    assert all(event["lost_steps"] == 0 for event in report["events"] if event["kind"] == "announced")
    assert report["completed_steps_lost"] <= 10 and report["steps_redone"] <= 10
    # Each step of a world once, however many nodes and rounds computed it.
    assert report["nodes_together"] == 3 and report["steps_computed"] == 150 + report["steps_redone"]
    run_dir = max((WORK_ROOT / "runs").glob("multinode-*"))
    roots = [root for root in (run_dir / "instances").glob("i-*") if root.is_dir()]
    assert len(roots) >= 4, "three nodes, and a replacement for each one lost"
    assert all(Instance(root.name, "", root, {}).processes() == [] for root in roots)


DDP_ENV = ("DDP_STEPS=900", "DDP_SAVE_EVERY=20", "DDP_STEP_SECONDS=0.05")


@pytest.mark.slow
def test_a_ddp_script_of_ones_own_by_path_on_three_nodes_survives_a_notice_and_a_power_off(tmp_path: Path) -> None:
    """jobs/ddp.toml by path: a plain torchrun DDP script that prints a loss line at its saves and handles
    no signal. The report counts progress from the published checkpoints."""
    report_file = tmp_path / "report.json"
    env_flags = [flag for assignment in DDP_ENV for flag in ("--env", assignment)]
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", "--job", "jobs/ddp.toml", *env_flags,
                           "--interruptions", "2", "--hard-kill", "1", "--interrupt-every", "10",
                           "--json", str(report_file)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["state"] == "DONE" and report["steps"] == 900, report
    assert report["progress_from"] == "checkpoints" and report["nodes_together"] == 3, report
    lost = [event for event in report["events"] if event["kind"] in ("announced", "hard-kill")]
    assert len(lost) == 3 and all(event["recovery_seconds"] is not None for event in lost), lost
    # Without an emergency save of its own, an interruption costs at most the steps since the last save.
    assert report["completed_steps_lost"] <= 20 * len(lost) and report["steps_redone"] <= 20 * len(lost), report
    run_dir = max((WORK_ROOT / "runs").glob("ddp-*"))
    roots = [root for root in (run_dir / "instances").glob("i-*") if root.is_dir()]
    assert len(roots) >= 4, "three nodes, and a replacement for each one lost"
    assert all(Instance(root.name, "", root, {}).processes() == [] for root in roots)


FSDP_ENV = ("FSDP_STEPS=600", "FSDP_SAVE_EVERY=20", "FSDP_STEP_SECONDS=0.05")


@pytest.mark.slow
def test_an_fsdp_script_of_ones_own_by_path_on_three_nodes_survives_a_notice_and_a_power_off(tmp_path: Path) -> None:
    """jobs/fsdp.toml by path: every rank saves its own shard of step-<N>/ with torch.distributed.checkpoint.
    The local spot cloud sees the published steps as progress, schedules its faults by them, and no
    interruption costs more than the steps since the last save."""
    report_file = tmp_path / "report.json"
    env_flags = [flag for assignment in FSDP_ENV for flag in ("--env", assignment)]
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", "--job", "jobs/fsdp.toml", *env_flags,
                           "--interruptions", "2", "--hard-kill", "1", "--interrupt-every", "10",
                           "--json", str(report_file)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["state"] == "DONE" and report["progress_from"] == "checkpoints", report
    lost = [event for event in report["events"] if event["kind"] in ("announced", "hard-kill")]
    assert len(lost) == 3 and all(event["resumed_step"] for event in lost), lost  # none started from nothing
    assert report["completed_steps_lost"] <= 20 * len(lost), report
