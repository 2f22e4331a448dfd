"""The built-in resumable trainer: `python -m spot_trainer train --model resnet|lm --steps N ...`.

Progress goes to stdout as one JSON object per line; human-readable messages go to stderr.
Exit codes: 0 finished (final checkpoint committed), 75 stopped by SIGTERM/SIGINT after an emergency
checkpoint, anything else a failure. Resume order: $RESUME_FROM (or a newer valid checkpoint this
trainer saved in the checkpoint directory since), else the newest valid checkpoint there, else a fresh
start. Interrupted any number of times, training ends with
weights bit-identical to an uninterrupted run on the same hardware (with `--deterministic off`: at the
same step, data order and generators, but not bit-identical; see determinism.py).

Under torchrun every rank runs this loop (see group.py): the ranks agree on the newest checkpoint
any of them holds, its holder sends it to the others, and from then on they step, save and stop
together; rank 0 writes the checkpoints.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..builtin_arguments import build_parser, complete
from ..progress import emit
from ..storage.files.local import (
    AsyncCheckpointer,
    CheckpointError,
    load_checkpoint,
    load_latest_valid,
    remove_stale_temps,
)
from .data import BatchOrder, DataError, augment_images, default_cache_dir, load_dataset
from .determinism import (
    STRICT,
    NotDeterministicError,
    check_kernels,
    configure_kernels,
    kernel_problem,
    prepare_process,
)
from .group import SOLO, Group, join_group
from .hold import Hold
from .models import build_model, compute_loss
from .ordered_reduce import average_in_rank_order
from .platform_record import current_platform
from .session import Session, TrainError, say
from .state import seed_everything
from .stop_flag import StopFlag

EX_TEMPFAIL = 75
EX_PEER_LOST = 76  # under torchrun: a collective failed because a peer died; not this rank's fault


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoint_dir is None:
        parser.error("--checkpoint-dir is required when $CHECKPOINT_DIR is not set")
    complete(parser, args)
    if args.precision == "fp16" and not torch.cuda.is_available():
        parser.error("--precision fp16 needs a CUDA device")
    return args


def warmup_cosine(warmup: int, total: int) -> Callable[[int], float]:
    """LR factor: linear warmup to 1, then cosine decay to 0 at the last step."""
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if device.type != "cuda" or precision == "fp32":
        return None
    return torch.float16 if precision == "fp16" else torch.bfloat16


def find_resume_point(checkpoint_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    explicit = os.environ.get("RESUME_FROM", "")
    if not explicit:
        return load_latest_valid(checkpoint_dir)
    try:
        chosen = Path(explicit), load_checkpoint(explicit)
    except CheckpointError as error:
        say(f"warning: RESUME_FROM ignored: {error}")
        older = load_latest_valid(checkpoint_dir)
        if older is None:  # starting over would silently throw away every step trained so far
            raise TrainError(f"RESUME_FROM {explicit} cannot be loaded and no older checkpoint is here: "
                             "refusing to start over from step 0") from None
        return older
    # torchrun re-forms a world by restarting its workers with the environment it was started with, so
    # RESUME_FROM still names the agent's restore point while the world has just saved a newer step here
    # (the agent sets aside whatever it cannot vouch for before it starts the command).
    return load_latest_valid(checkpoint_dir, above=int(chosen[1]["step"])) or chosen


def train_one_step(session: Session, dataset: Any, device: torch.device, amp: torch.dtype | None) -> torch.Tensor:
    batch = session.args.batch_size
    indices = session.group.shard(session.order.next_indices(batch))
    inputs, targets = dataset.batch(indices)
    if session.args.model == "resnet":
        inputs = augment_images(inputs)
    inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
    session.model.train()
    with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
        loss = compute_loss(session.forward or session.model, inputs, targets)
    session.optimizer.zero_grad(set_to_none=True)
    weighted = loss * session.group.loss_weight(len(indices), batch) if session.group.distributed else loss
    session.scaler.scale(weighted).backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    session.scaler.step(session.optimizer)
    session.scaler.update()
    session.scheduler.step()
    session.step += 1
    return loss


def run(args: argparse.Namespace, stop: StopFlag, group: Group = SOLO) -> int:
    device = group.device()
    configure_kernels(args.deterministic, device)
    seed_everything(args.seed)
    dataset = load_dataset(args.model, args.data, args.seed, args.context, args.data_cache or default_cache_dir())
    if len(dataset) < args.batch_size:
        raise TrainError(f"--batch-size {args.batch_size} is larger than the data set ({len(dataset)} samples)")
    if args.batch_size < group.world:
        raise TrainError(f"--batch-size {args.batch_size} is the global batch: it must be at least the world "
                         f"size ({group.world}) so that every rank gets a sample")
    model = build_model(args.model, args.width, args.context).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    amp = autocast_dtype(args.precision, device)
    inputs, targets = dataset.batch(group.shard(np.arange(args.batch_size)))
    check_kernels(model, inputs.to(device), targets.to(device), amp)
    session = Session(
        args, model, optimizer,
        torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(args.warmup_steps, args.steps)),
        torch.amp.GradScaler(device.type, enabled=amp == torch.float16),
        BatchOrder(len(dataset), args.seed), group=group, platform=current_platform(device, amp, group.world),
    )
    if group.distributed:
        session.forward = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
        if args.deterministic == STRICT:
            session.forward.register_comm_hook(None, average_in_rank_order)
        seed_everything(hash((args.seed, 0, group.rank)) % 2**63)  # each rank its own augmentations
    checkpoint_dir = Path(args.checkpoint_dir)
    try:  # an unusable place fails now, not after training
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TrainError(f"--checkpoint-dir {checkpoint_dir} is not a usable directory "
                         f"({error.strerror or error})") from None
    remove_stale_temps(checkpoint_dir)
    saved_step: int | None = None
    resume = agree_on_resume_point(group, find_resume_point(checkpoint_dir))
    if resume is not None:
        session.load_state_dict(resume[1], resume[0])
        saved_step = session.step if resume[0].parent.resolve() == checkpoint_dir.resolve() else None
        emit("resumed", step=session.step, **{"from": str(resume[0])})

    def on_commit(step: int, path: Path, stall_s: float, write_s: float) -> None:
        emit("checkpoint", step=step, path=str(path), stall_s=round(stall_s, 6), write_s=round(write_s, 6))

    store = AsyncCheckpointer(checkpoint_dir, args.keep, on_commit, pin_memory=device.type == "cuda")
    stop.install()  # from here a stop request is saved at a step boundary
    last_save = time.monotonic()
    window_start, window_steps = time.perf_counter(), 0
    hold = Hold(args.hold_at_step, Path(args.hold_while) if args.hold_while else None)
    while session.step < args.steps:
        hold.wait(session.step, stop, group)
        if group.any(stop.signal_name is not None):
            return emergency_stop(session, store, saved_step, stop.signal_name or "a peer's stop request")
        step_started = time.perf_counter()
        loss = train_one_step(session, dataset, device, amp)
        time.sleep(max(0.0, args.min_step_seconds - (time.perf_counter() - step_started)))
        window_steps += 1
        if session.step % args.log_every == 0:
            elapsed = time.perf_counter() - window_start
            emit("step", step=session.step, loss=round(loss.item(), 6),
                 samples_per_s=round(window_steps * args.batch_size / max(elapsed, 1e-9), 2))
            window_start, window_steps = time.perf_counter(), 0
        if group.any(checkpoint_due(args, session.step, last_save)):
            state = session.state_dict()
            if group.writer:
                store.save(session.step, state)
            saved_step, last_save = session.step, time.monotonic()
    if saved_step != session.step:
        state = session.state_dict()
        if group.writer:
            store.save_now(session.step, state)
    store.close()
    group.barrier()  # the others finish only once rank 0's last checkpoint is committed
    emit("done", step=session.step)
    return 0


def agree_on_resume_point(
    group: Group, local: tuple[Path, dict[str, Any]] | None
) -> tuple[Path, dict[str, Any]] | None:
    """Every rank resumes from the newest checkpoint any rank holds, sent by the lowest rank that
    holds it: a node that just joined, or one whose disk is behind, loses nothing."""
    if not group.distributed:
        return local
    step, holder = group.max_int(int(local[1]["step"]) if local else -1)
    if step < 0:
        return None
    path, state = group.broadcast((str(local[0]), local[1]) if group.rank == holder and local else None, holder)
    return Path(path), state


def checkpoint_due(args: argparse.Namespace, step: int, last_save: float) -> bool:
    if args.checkpoint_every_steps is not None:
        return bool(step % args.checkpoint_every_steps == 0)
    return bool(time.monotonic() - last_save >= args.checkpoint_every_seconds)


def emergency_stop(session: Session, store: AsyncCheckpointer, saved_step: int | None, signal_name: str) -> int:
    """Stop at this step boundary: finish the save in flight, save this step synchronously, exit 75.
    Under torchrun every rank stops at the same step; rank 0 saves and the others wait for it."""
    say(f"{signal_name} received: saving step {session.step} before exiting")
    started = time.perf_counter()
    try:
        store.wait()
    except CheckpointError as error:  # the periodic save failed; the emergency one may still succeed
        say(f"warning: {error}")
        saved_step = None
    path: Path | None = store.last_committed
    # Decided together: building the state is a collective, and only rank 0 knows its own saves.
    if session.group.any(saved_step != session.step or (session.group.writer and path is None)):
        state = session.state_dict()
        path = store.save_now(session.step, state) if session.group.writer else None
    if session.group.distributed:
        emit("group_stop", step=session.step, rank=session.group.rank)
        session.group.barrier()
    if session.group.writer:
        emit("emergency_checkpoint", step=session.step, path=str(path), signal=signal_name,
             stall_s=round(time.perf_counter() - started, 6))
    return EX_TEMPFAIL


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    prepare_process(args.deterministic)
    stop = StopFlag()
    stop.end_at_once()
    group = join_group()
    try:
        code = run_and_explain(args, stop, group)
    finally:
        group.close()
    return group.end_process(code)


def run_and_explain(args: argparse.Namespace, stop: StopFlag, group: Group) -> int:
    """`run`, with a known failure said in one line and its exit code returned."""
    try:
        return run(args, stop, group)
    except (TrainError, DataError, CheckpointError, NotDeterministicError, OSError) as error:
        say(f"error: {error}")
        return 1
    except RuntimeError as error:  # a collective failed: a peer is gone, and the world re-forms
        if (line := kernel_problem(error)) is not None:  # a kernel the start-up check did not reach
            say(f"error: {line}")
            return 1
        if not group.distributed:
            raise
        reason = str(error).splitlines()[0][:300]
        emit("peer_lost", rank=group.rank, reason=reason)
        say(f"error: lost a peer at a collective: {reason}")
        return EX_PEER_LOST


if __name__ == "__main__":
    sys.exit(main())
