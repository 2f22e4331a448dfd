"""The [schedule] and [notify] fields of a job file: the forms the agent and the capacity watch read
(spot_trainer/capacity/policy.py) and the alarm and notification settings, checked at synth."""

from __future__ import annotations

import re
import time
from collections.abc import Collection
from datetime import UTC, datetime

from spot_trainer import setting_patterns as pattern
from spot_trainer.builtin_arguments import total_steps
from spot_trainer.capacity.policy import is_duration, parse_deadline, parse_duration
from spot_trainer.settings import MAX_STALL_MINUTES, setting
from stacks.job.spec import NotifySpec, RunSpec, ScheduleSpec, field_error, plain_decimal


def utc_text(moment: datetime) -> str:
    """A TOML date-time (`deadline = 2026-12-01T18:00:00Z`, unquoted) in the one form the agent reads."""
    if moment.utcoffset() is None or moment.utcoffset() != UTC.utcoffset(None):
        raise field_error("schedule.deadline",
                          f"{moment.isoformat()} is not in UTC: end it in Z, like 2026-12-01T18:00:00Z")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_notify(notify: NotifySpec) -> None:
    if not re.fullmatch(pattern.EMAIL, notify.email):  # NotifyEmail's own pattern (empty: nobody)
        raise field_error("notify.email", f"expected an e-mail address like ml-team@example.com, got {notify.email!r}")
    if not 0 <= notify.stall_minutes <= MAX_STALL_MINUTES:
        raise field_error("notify.stall_minutes", f"expected 0 (no stall alarm) to {MAX_STALL_MINUTES} minutes, "
                    f"got {notify.stall_minutes}")


def _may_be_empty(field: str) -> bool:
    """Whether the field's console parameter takes an empty value, by its pattern in the settings table:
    a deadline and a spot wait may be empty (none), a deadline's margin may not."""
    return re.fullmatch(setting(field).console[0].pattern, "") is not None


def check_schedule(schedule: ScheduleSpec, run: RunSpec, given: Collection[str]) -> None:
    """The forms the agent and the capacity watch read (spot_trainer/capacity/policy.py), checked here first."""
    for field, text in (("deadline", schedule.deadline), ("max_spot_wait", schedule.max_spot_wait),
                        ("margin", schedule.margin)):
        if text != text.strip():
            raise field_error(f"schedule.{field}", f"{text!r} has leading or trailing spaces")
        if not text and _may_be_empty(f"schedule.{field}"):
            continue
        try:
            at = parse_deadline(text, first_start=time.time()) if field == "deadline" else parse_duration(text)
        except ValueError as error:
            raise field_error(f"schedule.{field}", str(error)) from None
        if field == "deadline" and not is_duration(text) and at <= time.time():
            raise field_error("schedule.deadline", f"{text} has already passed")
    if "budget_usd" in given:
        budget_text(schedule.budget_usd)
    if "total_steps" in given and schedule.total_steps < 1:
        raise field_error("schedule.total_steps", f"expected a positive number of steps, got {schedule.total_steps}")
    steps = total_steps(run.train_args) if run.program.builtin else None  # its parser ran in _check_run
    if "total_steps" in given and run.program.builtin and steps != schedule.total_steps:
        raise field_error("schedule.total_steps", f"{schedule.total_steps} differs from the built-in trainer's --steps "
                    f"{steps}: leave it out (the built-in trainer's own count is used)")


MAX_BUDGET_USD = 1e9


def budget_text(budget: float) -> str:
    """The cap as the BudgetUSD parameter and the agent take it: a plain decimal, at most 6 places."""
    text = plain_decimal(budget) if 0 < budget < MAX_BUDGET_USD else ""
    if not text or float(text) != budget:
        raise field_error("schedule.budget_usd", f"expected USD above 0 and below {MAX_BUDGET_USD:g}, at most 6 "
                          f"decimal places (like 50 or 0.25), got {budget!r}")
    return text
