"""The instances a job lost, in the status command's two-column layout: how many, how, and per loss what is
known of the work redone after it (a lower bound, or unknown and why; never a 0 that means unknown)."""

from __future__ import annotations

from collections.abc import Callable

from .lost_instances import Loss, Losses, LossKind


def describe_losses(losses: Losses, when: Callable[[float], str]) -> list[str]:
    """`when` writes a moment (epoch seconds) as the log does."""
    return [f"interruptions  {count_text(losses)}", *(loss_line(loss, when) for loss in losses.lost)]


def count_text(losses: Losses) -> str:
    paused = f"; {losses.pause_stops} stop(s) by a pause not counted" if losses.pause_stops else ""
    if not losses.records:
        return f"{losses.notices} with a notice; power-offs unknown (no instance records to see them by){paused}"
    if not losses.lost:
        return f"0{paused}"
    power_offs = f"{losses.power_offs} power-off{'s' if losses.power_offs != 1 else ''}"
    return f"{len(losses.lost)}: {losses.notices} with a notice, {power_offs}{paused}"


def loss_line(loss: Loss, when: Callable[[float], str]) -> str:
    if loss.kind is LossKind.NOTICE:
        saved = f"saved step {loss.saved_step}" if loss.saved_step is not None else "saved no checkpoint"
        what = f"notice at {when(loss.at)} ({loss.reason}); {saved}"
    else:
        what = f"power-off, last seen {when(loss.at)}"
    return f"  {loss.instance:<12} {what}; {record_text(loss)}; {redone_text(loss)}"  # an EC2 id runs past the column


def record_text(loss: Loss) -> str:
    known = [f"step {loss.record_step}"] if loss.record_step is not None else []
    if loss.disk_checkpoint_step is not None:
        known.append(f"checkpoint {loss.disk_checkpoint_step} on its disk")
    return f"its record: {', '.join(known)}" if known else "its record holds no step"


def redone_text(loss: Loss) -> str:
    if not loss.trained:
        return "redone: none, it trained nothing (it waited for the job lease)"
    if loss.resumed_from is None:
        return "redone: unknown (no round has started since)"
    resumed = f"the next round resumed from step {loss.resumed_from}"
    redone = loss.redone_at_least
    if redone is None:
        return f"{resumed}; redone: unknown (no step of it was recorded)"
    if redone == 0:
        return f"{resumed}; no redone step seen"
    return f"{resumed}: at least {redone} step{'s' if redone != 1 else ''} redone"
