"""The demo's command line and interruption plan, without a deploy: bad flags end in one clear line,
and the schedule places interruptions where the user asked for them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.interruptions import ANNOUNCED, HARD, Injector, InterruptionPlan


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rate", "0"], "--rate 0.0 must be a positive number per hour"),
        (["--notice-seconds", "-5"], "--notice-seconds -5.0 must be 0 or more"),
        (["--hard-kill", "-1"], "--interruptions and --hard-kill must be 0 or more"),
        (["--spot-discount", "1.5"], "--spot-discount 1.5 must lie in [0, 1)"),
        (["--job", "no-such-job"], "no-such-job"),
        (["--timeout", "0"], "--timeout 0.0 must be a positive number of seconds"),
        (["--early-replacement", "-1"], "--early-replacement -1 must be 0 or more"),
        (["--env", "HF_STEPS"], "--env 'HF_STEPS': expected NAME=VALUE"),
        (["--json", "{tmp}/no-such-folder/report.json"], "no folder {tmp}/no-such-folder to write the report into"),
        (["--price-trace", "{tmp}/trace.txt"], "--price-trace: price trace {tmp}/trace.txt: not JSON (Expecting value"),
        (["--train-args", "--model lm --synthetic --steps abc"], "--train-args: argument --steps: invalid"),
        (["--train-args", "--model lm --steps 9"], "--train-args: one of the arguments --data --synthetic is required"),
        (["--cross-region-mbps", "0"], "--cross-region-mbps 0: expected a positive number of megabits per second"),
        (["--cross-region-latency-ms", "-1"], "--cross-region-latency-ms -1: expected 0 to 60000 milliseconds"),
    ],
)
def test_bad_flag_is_one_line_before_anything_starts(flags: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "trace.txt").write_text("spot prices, by hand\n")
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", *flags], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("localcloud: ") and message.format(tmp=tmp_path) in lines[0], (
        done.stderr)
    assert "Traceback" not in done.stderr


def test_schedule_spreads_interruptions_over_the_steps_left_hard_kills_first() -> None:
    injector = Injector(InterruptionPlan(count=2, hard_kills=1), total_steps=40)
    fired = [(step, kind) for step in range(41) if (kind := injector.due(0.0, step))]
    assert fired == [(10, HARD), (20, ANNOUNCED), (30, ANNOUNCED)]


def test_schedule_counts_from_where_the_replacement_resumed() -> None:
    injector = Injector(InterruptionPlan(count=2), total_steps=90)
    assert injector.due(0.0, 30) == ANNOUNCED  # 0 + 90/3
    # The replacement resumed at 60 (its predecessor ran on during a long notice): 60 + 30/2.
    assert injector.due(0.0, 74, start=60) is None
    assert injector.due(0.0, 75, start=60) == ANNOUNCED


def test_rate_draws_poisson_gaps_of_the_asked_mean() -> None:
    injector = Injector(InterruptionPlan(rate_per_hour=36.0, seed=7), total_steps=None)  # mean gap 100 s
    times = [t for t in range(0, 200_000, 5) if injector.due(float(t), None)]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert 90 <= sum(gaps) / len(gaps) <= 110
    assert min(gaps) < 20 < 300 < max(gaps)  # exponential: short and long gaps both occur


def test_a_bad_job_file_field_is_named_not_hidden_behind_the_cli_exit_status(tmp_path: Path) -> None:
    job = tmp_path / "bad.toml"
    job.write_text('[run]\ntrain_args = "--model lm --synthetic --steps 10"\n[capacity]\nmax_price = -1\n')
    done = subprocess.run([sys.executable, "-m", "localcloud", "demo", "--job", str(job)], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"localcloud: {job}: capacity.max_price: expected a positive price, got '-1'", done.stderr
    assert "moto" not in done.stderr, "the job file is checked before any server starts"
