"""`python -m localcloud demo --job example [...]`: deploy a job's stack to a local AWS stand-in and
train it on spot instances that get interrupted; `python -m localcloud up --job NAME`: deploy it and keep
it up for the `spot-trainer` job commands until Ctrl-C (`env`, `interrupt` and `down` talk to it);
`python -m localcloud destroy`: stop anything a killed demo left running and delete the local cloud's
files (.localcloud/).

Exit codes: 0 the job finished (DONE), or `up` ended by Ctrl-C; 1 it failed or the local cloud could not
run it; 2 bad usage; 130 a demo interrupted by Ctrl-C. Nothing is left running in any case.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.cloud import WORK_ROOT, CloudError, JobRefused, LocalCloud
from localcloud.iam_report import summary_lines
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan, PlanError
from localcloud.life_picture import draw_life
from localcloud.outages import SpotOutage, parse_outage
from localcloud.pace import PaceCheck
from localcloud.player import Player
from localcloud.progress import ProgressLine
from localcloud.region_capacity import RegionOutage
from localcloud.region_flags import add_link_flags, cross_region_link, region_flags, region_plan
from localcloud.region_groups import newest_status
from localcloud.region_link import CrossRegionLink
from localcloud.report import DEFAULT_DISCOUNT, build_report, flat_prices
from localcloud.run_options import RunOptions, command_env
from localcloud.session import STATE_ROOT, SessionError, find_session, sessions
from localcloud.up import UpInputs, down, stop_instances, stop_leftovers, up
from spot_trainer.aws_names import stack_name
from spot_trainer.builtin_arguments import arguments_problem, total_steps
from spot_trainer.command_text import Program
from spot_trainer.costs.spot_prices import PriceError, TracePrices
from spot_trainer.secret_refs import SecretRef, SecretRefError, parse_refs
from spot_trainer.storage.record_kinds import JobState
from stacks.help_text import first_paragraph


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localcloud", description=first_paragraph(__doc__))
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="deploy the job locally and train it through interruptions")
    demo.add_argument("--job", default="example", help="jobs/<name>.toml or a path (default: example)")
    add_spot_flags(demo)
    demo.add_argument("--spot-discount", type=float, default=DEFAULT_DISCOUNT, metavar="D",
                      help="spot price = on-demand × (1 − D) for the cost report (default 0.70)")
    demo.add_argument("--spot-outage", action="append", default=[], metavar="START:LEN",
                      help="no spot capacity from START to START+LEN seconds into the run (or for LEN seconds "
                           "from when S3 holds step N, with stepN:LEN): running spot instances are reclaimed "
                           "and none launches (repeatable)")
    demo.add_argument("--outage", action="append", default=[], metavar="REGION:START:LEN",
                      help="a job of several regions: no spot capacity in REGION from START to START+LEN seconds "
                           "into the run (or stepN:LEN), its placement score 1 meanwhile (repeatable)")
    demo.add_argument("--score", action="append", default=[], metavar="REGION:SCORE",
                      help="a job of several regions: REGION's placement score while it has capacity (default 9)")
    demo.add_argument("--price-trace", type=Path, default=None, metavar="FILE",
                      help="spot prices over time for the cost report (JSON list of type, az, time, price)")
    demo.add_argument("--timeout", type=float, default=900.0, metavar="S", help="give up after S seconds")
    demo.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the report as JSON")
    commands.add_parser("destroy", help="stop leftovers of a killed demo and delete .localcloud/")
    add_up_commands(commands)
    return parser


def add_spot_flags(parser: argparse.ArgumentParser) -> None:
    """How spot is played, and the training command's inputs: the same for `demo` and `up`."""
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--interruptions", type=int, default=None, metavar="N",
                      help="announced interruptions spread evenly over the steps (default 3)")
    when.add_argument("--rate", type=float, default=None, metavar="PER_HOUR",
                      help="Poisson interruptions at this mean rate per hour of wall time")
    parser.add_argument("--interrupt-every", type=float, default=20.0, metavar="S",
                      help="for a command with no --steps: seconds after an instance's first progress "
                           "(a step line or a new checkpoint) before each scheduled interruption (default 20)")
    parser.add_argument("--hard-kill", type=int, default=0, metavar="N",
                      help="power-offs without notice, before the --interruptions announced ones (default 0)")
    parser.add_argument("--hard-kill-fraction", type=float, default=0.0, metavar="F",
                      help="with --rate: share of interruptions without notice")
    parser.add_argument("--notice-seconds", type=float, default=8.0, metavar="S",
                      help="notice window before power-off (AWS: 120 s; default 8)")
    parser.add_argument("--rebalance", action="store_true", help="send a rebalance recommendation with each notice")
    parser.add_argument("--early-replacement", type=int, default=0, metavar="N",
                      help="the first N notices launch the replacement at once (two instances overlap)")
    parser.add_argument("--train-args", default=None, help="override the job's built-in trainer arguments")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                      help="extra environment for the training command, e.g. HF_STEPS=300 (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --rate process")
    add_link_flags(parser)


def add_up_commands(commands: Any) -> None:
    up = commands.add_parser("up", help="deploy the job locally and keep it up for the job commands until Ctrl-C")
    up.add_argument("--job", required=True, help="jobs/<name>.toml or a path")
    up.add_argument("--secret", action="append", default=[], metavar="NAME=VALUE",
                    help="the value of a secret the job file's run.secrets names, created in the local cloud "
                         "before the deploy; NAME alone takes $NAME (repeatable)")
    add_spot_flags(up)
    beside = {"env": "print the running up's `export AWS_...` lines",
              "interrupt": "interrupt the job's instance now: a spot notice, or a power-off with --hard",
              "down": "end the running up: instances off, stack destroyed, local AWS stopped"}
    for name, text in beside.items():
        command = commands.add_parser(name, help=text)
        command.add_argument("--job", default=None, help="the job's name (default: the only job up)")
        if name == "interrupt":
            command.add_argument("--hard", action="store_true", help="power off without notice")
    for name in ("up", *beside):
        commands.choices[name].add_argument(
            "--state", type=Path, default=STATE_ROOT, metavar="DIR",
            help="where up keeps what env, interrupt and down read (default .localcloud/up)")


def main(argv: Sequence[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    # SIGTERM ends the run as Ctrl-C does: every instance and server is stopped on the way out.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return run_command(options)
    except (PlanError, CloudError, PriceError, SessionError) as error:
        print(f"localcloud: {error}", file=sys.stderr, flush=True)
        return 2 if isinstance(error, (PlanError, PriceError, JobRefused)) else 1
    except KeyboardInterrupt:
        print("\nlocalcloud: interrupted; every instance and server was stopped", file=sys.stderr, flush=True)
        return 130


def run_command(options: argparse.Namespace) -> int:
    if options.command == "demo":
        return demo(options)
    if options.command == "destroy":
        return destroy()
    if options.command == "up":
        return up(options.state, checked_up_inputs(options))
    session = find_session(options.state, options.job)
    if options.command == "env":
        if session.up_pid() is None:
            raise SessionError(f"no `python -m localcloud up` runs for job {session.job!r}")
        print(session.env_file.read_text(), end="")
    elif options.command == "interrupt":
        answer = session.ask(HARD if options.hard else ANNOUNCED)
        print(answer)
        return 0 if answer.startswith("instance ") and " runs on-demand" not in answer else 1
    else:
        print(f"localcloud: {down(session)}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class JobFile:
    name: str
    command: str
    train_args: str
    secrets: tuple[SecretRef, ...] = ()

    @property
    def stack_name(self) -> str:
        return stack_name(self.name)

    @property
    def program(self) -> Program:
        return Program(self.command)


def read_job(job: str) -> JobFile:
    """What the player needs from a job file. Its full validation runs in `cdk synth` (app.py); the
    stack code is not imported here, as it would start a Node.js process in this one."""
    from stacks.job.spec import JobSpecError
    from stacks.job_file import read_job_file

    try:
        data, path = read_job_file(job)
    except JobSpecError as error:
        raise PlanError(str(error)) from None
    run = data.get("run") if isinstance(data.get("run"), dict) else {}
    try:
        secrets = tuple(parse_refs(run.get("secrets", [])))
    except (SecretRefError, TypeError, AttributeError):
        secrets = ()  # `cdk synth` refuses the field with its own line
    return JobFile(str(data.get("name", path.stem)), str(run.get("command", "builtin")),
                   str(run.get("train_args", "")), secrets)


def secret_values(job: JobFile, assignments: list[str]) -> list[tuple[SecretRef, str]]:
    """Each secret the job file names with the value `--secret NAME=VALUE` gives it; every one is needed."""
    named = {ref.env: ref for ref in job.secrets}
    given: dict[str, str] = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals:  # the value from this shell's environment, kept off the command line
            if name not in os.environ:
                raise PlanError(f"--secret {name}: no {name} in the environment; give NAME=VALUE or export it")
            value = os.environ[name]
        if name not in named:
            known = f"it names {', '.join(named)}" if named else "it names none"
            raise PlanError(f"--secret {name}: the job file's run.secrets does not name {name} ({known})")
        given[name] = value
    for name, ref in named.items():
        if name not in given:
            raise PlanError(f"job {job.name} reads {name} from {ref.service}:{ref.name}: "
                            f"give its value with --secret {name}=VALUE")
    return [(named[name], value) for name, value in given.items()]


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class DemoInputs:
    """Everything the flags and the job file say, checked before any server starts."""

    plan: InterruptionPlan
    outages: list[SpotOutage]
    region_outages: list[RegionOutage]
    scores: dict[str, int]
    prices: TracePrices | None
    command_env: dict[str, str]
    job: JobFile
    train_args: str
    link: CrossRegionLink


def checked_plan(options: argparse.Namespace) -> InterruptionPlan:
    plan = InterruptionPlan(
        count=3 if options.interruptions is None and options.rate is None else (options.interruptions or 0),
        hard_kills=options.hard_kill, rate_per_hour=options.rate, notice_seconds=options.notice_seconds,
        rebalance=options.rebalance, early_replacement=options.early_replacement,
        hard_kill_fraction=options.hard_kill_fraction, seed=options.seed, spacing_seconds=options.interrupt_every,
    )
    plan.check()
    return plan


def checked_job(options: argparse.Namespace) -> tuple[JobFile, str]:
    """The job file and the built-in trainer's arguments it runs with (the job's, or --train-args)."""
    job = read_job(options.job)
    train_args = job.train_args if options.train_args is None else options.train_args
    if options.train_args is not None and job.program.builtin and (problem := arguments_problem(train_args)):
        raise PlanError(f"--train-args: {problem}")
    return job, train_args


def checked_up_inputs(options: argparse.Namespace) -> UpInputs:
    plan = checked_plan(options)
    job, train_args = checked_job(options)
    return UpInputs(job=options.job, name=job.name, plan=plan,
                    total_steps=total_steps(train_args) if job.program.builtin else None,
                    command_env=command_env(options.env),
                    parameters={} if options.train_args is None else {"TrainArguments": train_args},
                    secrets=secret_values(job, options.secret), link=cross_region_link(options))


def checked_inputs(options: argparse.Namespace) -> DemoInputs:
    """A flag that cannot work is one line now, not after moto, a synth and a deploy (or, for --json,
    after the whole run)."""
    plan = checked_plan(options)
    if not options.timeout > 0:
        raise PlanError(f"--timeout {options.timeout} must be a positive number of seconds")
    outages = [parse_outage(text) for text in options.spot_outage]
    region_outages, scores = region_flags(options.outage, options.score)
    if options.price_trace is not None and not options.price_trace.is_file():
        raise PlanError(f"--price-trace {options.price_trace}: no such file")
    try:
        prices = TracePrices.from_file(options.price_trace) if options.price_trace is not None else None
    except PriceError as error:
        raise PlanError(f"--price-trace: {error}") from None
    if not 0 <= options.spot_discount < 1:
        raise PlanError(f"--spot-discount {options.spot_discount} must lie in [0, 1)")
    if options.json is not None and not options.json.resolve().parent.is_dir():
        raise PlanError(f"--json {options.json}: no folder {options.json.parent} to write the report into")
    job, train_args = checked_job(options)
    return DemoInputs(plan, outages, region_outages, scores, prices, command_env(options.env), job, train_args,
                      cross_region_link(options))


def demo(options: argparse.Namespace) -> int:
    inputs = checked_inputs(options)
    job, train_args = inputs.job, inputs.train_args
    progress = ProgressLine()
    # Named by start time, and unique: two demos started in the same second get a folder each.
    (WORK_ROOT / "runs").mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"{job.name}-{time.strftime('%Y%m%d-%H%M%S')}-", dir=WORK_ROOT / "runs"))
    started = time.monotonic()
    cloud = LocalCloud(workdir, log=progress.message, link=inputs.link)
    progress.message(f"synthesizing {job.stack_name} with the CDK CLI")
    app_dir = cloud.synth(options.job)  # the job file's own checks, before any server starts
    with cloud:
        progress.message(f"local AWS (moto) on {cloud.aws_env['AWS_ENDPOINT_URL']}; files in {workdir}")
        parameters = {} if options.train_args is None else {"TrainArguments": train_args}
        deployment = cloud.deploy(app_dir, parameters)
        for place in deployment.every_region():  # a job of several regions: each region's stack
            progress.message(f"deployed {place.stack}: bucket {place.bucket}, group {place.group}, {place.region}")
        # The built-in trainer's --steps spreads the schedule over the steps; any other command's
        # interruptions come every --interrupt-every seconds of training.
        steps = total_steps(train_args) if job.program.builtin else None
        pace = PaceCheck(steps, options.timeout, progress.message)
        run = RunOptions(plan=inputs.plan, total_steps=steps, timeout_seconds=options.timeout,
                         command_env=inputs.command_env,
                         outages=inputs.outages, price_trace=options.price_trace,
                         region_plan=region_plan(cloud.capacity_board, deployment, inputs.region_outages,
                                                 inputs.scores))
        player = Player(cloud, deployment, run, on_tick=lambda player: (progress(player), pace(player))).run()
        status = newest_status(cloud, deployment)
        report = build_report(player, status, options.spot_discount, prices=inputs.prices)
        prices = inputs.prices or flat_prices(options.spot_discount)
        picture = draw_life(cloud, deployment, workdir / f"{job.name}.svg", prices)
        for line in summary_lines(cloud.iam_decisions, cloud.client("iam"), deployment.stack):
            progress.message(line)
        cloud.destroy(deployment)
        kept = cloud.client("s3").list_objects_v2(Bucket=deployment.bucket, Prefix=f"{job.name}/")["KeyCount"]
        progress.message(f"destroyed {deployment.stack}; bucket {deployment.bucket} kept ({kept} objects)")
    progress.message(report.text())
    progress.message(picture)
    progress.message(f"demo finished in {time.monotonic() - started:.0f}s")
    if options.json is not None:
        options.json.write_text(report.to_json())
    return 0 if report.state == JobState.DONE else 1


def destroy() -> int:
    """Leftovers of a demo or an up that was itself killed: its instances' processes, then the files."""
    stopped = stop_instances((WORK_ROOT / "runs").glob("*/instances/i-*"))
    stopped += sum(stop_leftovers(session) for session in sessions(STATE_ROOT))
    shutil.rmtree(WORK_ROOT, ignore_errors=True)
    print(f"localcloud: stopped {stopped} leftover processes; removed {WORK_ROOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
