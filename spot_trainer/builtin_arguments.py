"""The built-in trainer's command line, without torch: the trainer parses its flags with it, the stack
checks a job's `train_args` with the same parser before anything is deployed, and the agent reads a job's
size from it. It lives in the annex, beside the settings table, because all three read it.

Standard library only: importing this must never load torch (the stack and the agent import it).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

MODEL_NAMES = ("resnet", "lm")
DETERMINISM_MODES = ("strict", "off")
DEFAULT_WIDTH = {"resnet": 16, "lm": 64}
LM_HEADS = 4
DESCRIPTION = "The built-in resumable trainer: `python -m spot_trainer train --model resnet|lm --steps N ...`."


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of 0 or more, got {text}")
    return value


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser = parser_class(prog="trainer train", description=DESCRIPTION)
    parser.add_argument("--model", choices=MODEL_NAMES, required=True)
    parser.add_argument("--steps", type=positive_int, required=True, help="optimizer steps in total")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="directory or s3://bucket/prefix (formats: spot_trainer/data.py)")
    source.add_argument("--synthetic", action="store_true", help="generated deterministic data")
    every = parser.add_mutually_exclusive_group()
    every.add_argument("--checkpoint-every-steps", type=positive_int, default=None, metavar="K")
    every.add_argument("--checkpoint-every-seconds", type=positive_float, default=None, metavar="S")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR") or None,
                        help="default: $CHECKPOINT_DIR")
    parser.add_argument("--keep", type=positive_int, default=3, help="committed checkpoints kept locally")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="peak learning rate (AdamW)")
    parser.add_argument("--warmup-steps", type=int, default=None, help="default: 10%% of --steps")
    parser.add_argument("--log-every", type=positive_int, default=10)
    parser.add_argument("--min-step-seconds", type=non_negative_float, default=0.0, metavar="S",
                        help="pace steps to at least S seconds each (demos, tests); results are unchanged")
    parser.add_argument("--hold-at-step", type=positive_int, default=None, metavar="K",
                        help="with --hold-while: from step K on, wait at each step boundary while PATH exists "
                             "(demos, tests: a fault injected while training runs); a stop to any rank ends it, saved")
    parser.add_argument("--hold-while", default=None, metavar="PATH", help="the file --hold-at-step waits on")
    parser.add_argument("--width", type=positive_int, default=None, help="model width (resnet 16, lm 64)")
    parser.add_argument("--context", type=positive_int, default=64, help="lm: bytes per sample")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto",
                        help="auto: bf16 autocast on CUDA, fp32 on CPU")
    parser.add_argument("--data-cache", type=Path, default=None, help="where S3 data is mirrored")
    parser.add_argument("--deterministic", choices=DETERMINISM_MODES, default="strict",
                        help="strict: a resumed run ends bit-identical to an uninterrupted one; off: faster on "
                             "CUDA, resumes at the same step, data order and RNG, not bit-identical")
    return parser


def complete(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Derived defaults and the checks across flags that need no torch; errors go through parser.error."""
    args.width = args.width or DEFAULT_WIDTH[args.model]
    if args.checkpoint_dir is not None and not args.checkpoint_dir.strip():
        parser.error("--checkpoint-dir must not be empty")  # '' would write into whatever directory this runs in
    if args.checkpoint_every_steps is None and args.checkpoint_every_seconds is None:
        args.checkpoint_every_steps = max(1, min(100, args.steps // 10))
    if args.warmup_steps is None:
        args.warmup_steps = args.steps // 10
    if not 0 <= args.warmup_steps <= args.steps:
        parser.error(f"--warmup-steps {args.warmup_steps} must be between 0 and --steps {args.steps}")
    if (args.hold_at_step is None) != (args.hold_while is None):
        parser.error("--hold-at-step and --hold-while go together: the step to hold at and the file that holds it")
    if args.model == "lm" and args.width % LM_HEADS:
        parser.error(f"--width {args.width} must be a multiple of {LM_HEADS} for the lm model")
    return args


class ArgumentsError(ValueError):
    """The trainer would refuse these arguments; str() is argparse's one-line reason."""


class _RaisingParser(argparse.ArgumentParser):
    """Raises instead of printing usage and exiting: a caller checking a job wants the reason."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ArgumentsError(message or "would exit without training")


def check_arguments(words: Sequence[str]) -> argparse.Namespace:
    """The arguments as the trainer will read them on an instance. ArgumentsError says why the trainer
    would refuse them, or why they would mislead: an abbreviated or repeated flag the trainer takes, but the
    stack and the agent read by its full name and first occurrence. --checkpoint-dir may be left out (the
    agent sets $CHECKPOINT_DIR); whether --precision fp16 finds a GPU is known only on the instance."""
    if "-h" in words or "--help" in words:
        # The trainer would print its help and exit 0, and the job would end DONE after no steps.
        raise ArgumentsError("--help only prints the help: the job would end after no steps")
    parser = build_parser(_RaisingParser)
    known = {option for action in parser._actions for option in action.option_strings}
    flags = [word.split("=", 1)[0] for word in words if word.startswith("--")]
    if twice := next((flag for flag in flags if flags.count(flag) > 1), None):
        # argparse keeps the last, a reader of the job file (or the agent's job size) may take the first.
        raise ArgumentsError(f"{twice} is given more than once")
    for flag in flags:
        spelled = [option for option in sorted(known) if option.startswith(flag)]
        if flag not in known and spelled:
            # argparse would read it as the flag it abbreviates, but the stack reads --data and --steps
            # by their full names (read access to the data, the job's size).
            raise ArgumentsError(f"{flag}: spell the flag in full ({', '.join(spelled)})")
    return complete(parser, parser.parse_args(list(words)))


def arguments_problem(train_args: str) -> str | None:
    """Why a job's `train_args` cannot train it, or None: what synth says of run.train_args and the agent
    of SPOT_TRAIN_ARGS (the console's TrainArguments reaches the agent unchecked)."""
    if not train_args.strip():
        return ('the built-in trainer needs --model, --steps and --data or --synthetic, '
                'e.g. "--model resnet --steps 20000 --data s3://bucket/cifar10"')
    try:
        words = shlex.split(train_args)
        check_arguments(words)
    except ArgumentsError as error:
        return f"{error} (in {train_args!r})"
    except ValueError as error:  # shlex: an unbalanced quote
        return f"cannot be parsed as shell words ({error}): {train_args!r}"
    if any(word.split("=", 1)[0] == "--checkpoint-dir" for word in words):
        return ("leave out --checkpoint-dir: the agent restores into $CHECKPOINT_DIR and uploads only what the "
                "trainer saves there")
    return None


def total_steps(train_args: str) -> int | None:
    """The job's size, `--steps`, as the trainer will read it from `train_args`; None when the trainer would
    refuse them (then the job fails at start, and nothing can be planned from its size)."""
    try:
        return int(check_arguments(shlex.split(train_args)).steps)
    except (ValueError, ArgumentsError):
        return None
