"""Notifications: one short human-readable message on the job's SNS topic for each event a person
watching a days-long job wants to hear about (interrupted, resumed, market switched, done, failed,
checkpoints not reaching S3).

A message is sent from the event the agent records anyway, so the record and the mail agree.
Publishing is best effort: a failure is logged and never touches training.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ...storage.checkpoint_versions import step_text
from ...storage.record_kinds import EventKind

SUBJECT_LIMIT = 100  # SNS refuses longer subjects


class SnsClient(Protocol):
    """boto3 "sns": Publish on the job's own topic (the instance role allows nothing else)."""

    def publish(self, *, TopicArn: str, Subject: str, Message: str) -> Any: ...


def message_for(job: str, kind: str, fields: Mapping[str, Any]) -> tuple[str, str] | None:
    """(subject, message) for the kinds worth a notification; None for the rest."""
    instance = fields.get("instance") or "an instance"
    step = fields.get("step")
    # "step 250", or a checkpoint that states no step by its version's time
    shown = step_text(step) if type(step) is int else f"step {step}"
    at_step = f" at {shown}" if step is not None else ""
    if kind == EventKind.INTERRUPTION and fields.get("paused"):
        kept = f"checkpoint {shown} is safe in S3" if step is not None else "it had saved no checkpoint yet"
        return (f"Spot Trainer {job}: paused"[:SUBJECT_LIMIT],
                f"Job {job} stopped on {instance} for the pause; {kept}. `spot-trainer resume --job {job}` goes on.")
    resumes = (f"checkpoint {shown} is safe in S3 and a replacement will resume from it." if step is not None
               else "it had saved no checkpoint yet, so a replacement starts from the beginning.")
    texts: dict[str, tuple[str, str]] = {
        EventKind.INTERRUPTION: ("interrupted",
                                 f"Job {job} was interrupted on {instance} ({fields.get('reason')}); {resumes}"),
        EventKind.RESUME: ("resumed", f"Job {job} resumed on {instance} from checkpoint {shown}."),
        EventKind.MARKET: (f"now {fields.get('to')}", f"Job {job} switched from {fields.get('from')} to "
                           f"{fields.get('to')}{at_step}: {fields.get('reason')}."),
        EventKind.DONE: ("done", f"Job {job} finished{at_step}; its group is scaled to zero."),
        EventKind.BUDGET: ("stopped at its budget", f"Job {job} stopped{at_step}: {fields.get('reason')}. Its group "
                           "is scaled to zero; raise its budget (BudgetUSD) and its capacity to go on from its last "
                           "checkpoint."),
        EventKind.FAILED: ("FAILED", f"Job {job} failed: {fields.get('reason')}. Its group is scaled to zero."),
        EventKind.UPLOAD_FAILING: ("checkpoints not reaching S3",
                                   f"Job {job}: {fields.get('message')} (on {instance}). Until this is fixed, an "
                                   "interruption loses what was trained since the last checkpoint in S3; see the "
                                   "instance's log."),
    }
    if kind not in texts:
        return None
    subject, message = texts[kind]
    return f"Spot Trainer {job}: {subject}"[:SUBJECT_LIMIT], message


@dataclass
class Notifier:
    topic_arn: str
    sns: SnsClient
    job: str
    log: Callable[[str], None]

    def event(self, kind: str, fields: Mapping[str, Any]) -> None:
        text = message_for(self.job, kind, fields)
        if text is None:
            return
        try:
            self.sns.publish(TopicArn=self.topic_arn, Subject=text[0], Message=text[1])
        except Exception as error:
            self.log(f"could not publish the {kind} notification: {error}")
