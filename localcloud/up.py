"""`python -m localcloud up --job NAME`: the job deployed to the local spot cloud and kept up until Ctrl-C
(or `python -m localcloud down`), for the job commands to act on as on AWS.

It prints the `export AWS_...` lines that point every AWS tool at its moto server (stdout holds nothing
else, so `eval` takes them), then plays EC2 for the job's group as the demo does: interruptions on the
plan's schedule or rate, one more whenever `python -m localcloud interrupt` asks (localcloud/session.py
carries the request). A group taken to 0, by `spot-trainer pause`, the job's end or its failure, is
waited on with nothing deleted; `spot-trainer resume` brings instances back and the play goes on.
On Ctrl-C every instance is powered off, the stack destroyed, moto stopped and the run's folder removed.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.cloud import CloudError, Deployment, LocalCloud
from localcloud.instance import Instance
from localcloud.interruptions import ANNOUNCED, HARD, Injector, InterruptionPlan
from localcloud.player import Player
from localcloud.progress import ProgressLine
from localcloud.region_groups import RegionGroups, newest_status
from localcloud.region_link import CrossRegionLink
from localcloud.run_options import RunOptions
from localcloud.session import Session, SessionError, export_lines, process_alive
from spot_trainer.aws_names import stack_name
from spot_trainer.capacity.policy import ON_DEMAND
from spot_trainer.secret_refs import SSM, SecretRef
from spot_trainer.storage.record_kinds import JobState

IDLE_SECONDS = 0.5  # how often a group at 0 is looked at for a resume
DOWN_SECONDS = 180.0  # the most `down` waits for an up to power off, destroy and stop


@dataclass(frozen=True)
class UpInputs:
    """What the flags and the job file say, checked before any server starts."""

    job: str  # as given: a name in jobs/ or a path
    name: str  # the job's name: its stack, its S3 prefix, its folder in the state folder
    plan: InterruptionPlan
    total_steps: int | None  # the built-in trainer's --steps places the schedule; else every few seconds
    command_env: dict[str, str]
    parameters: dict[str, str]  # the stack's parameters to deploy with (TrainArguments)
    secrets: list[tuple[SecretRef, str]]  # each of the job's secrets and its value
    link: CrossRegionLink = field(default_factory=CrossRegionLink)  # a job of several regions: between them


def up(state: Path, inputs: UpInputs) -> int:
    session = Session(state / inputs.name)
    if (pid := session.up_pid()) is not None:
        raise SessionError(f"job {inputs.name!r} is already up (process {pid}); "
                           f"`python -m localcloud down --job {inputs.name}` ends it")
    stop_leftovers(session)
    # Ctrl-C (and `down`, which sends it) ends the up even where it was started with SIGINT ignored, as a
    # non-interactive shell starts a command with `&`.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    progress = ProgressLine()
    cloud = LocalCloud(session.cloud_dir, log=progress.message, link=inputs.link)
    try:
        progress.message(f"synthesizing {stack_name(inputs.name)} with the CDK CLI")
        app_dir = cloud.synth(inputs.job)
        _start_deaf_to_ctrl_c(cloud)
        deployment: Deployment | None = None
        try:
            create_secrets(cloud, inputs.secrets)
            deployment = cloud.deploy(app_dir, inputs.parameters)
            assert cloud.moto is not None and cloud.moto.process is not None
            session.open(deployment.stack, cloud.aws_env, cloud.moto.process.pid)
            sys.stdout.write(export_lines(cloud.aws_env))
            sys.stdout.flush()
            _say_how(progress, deployment, session)
            keep_playing(cloud, deployment, inputs, session, progress)
        except KeyboardInterrupt:
            progress.message("localcloud up: ending: powering off, destroying the stack")
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            if deployment is not None:
                tear_down(cloud, deployment, progress)
            cloud.stop()
    finally:
        shutil.rmtree(session.folder, ignore_errors=True)
    progress.message(f"localcloud up: the local AWS is stopped and {session.folder} removed")
    return 0


def _start_deaf_to_ctrl_c(cloud: LocalCloud) -> None:
    """moto starts with Ctrl-C ignored (a child keeps an ignored SIGINT): the terminal's Ctrl-C reaches this
    process only, which still needs moto to power off and destroy in order."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cloud.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _say_how(progress: ProgressLine, deployment: Deployment, session: Session) -> None:
    job = deployment.job
    for line in (*(f"deployed {place.stack}: bucket {place.bucket}, group {place.group}, {place.region}"
                   for place in deployment.every_region()),
                 "the job commands reach this local cloud with the exports above (also in "
                 f"{session.env_file}: `eval \"$(python -m localcloud env)\"` in another shell)",
                 f"`python -m localcloud interrupt --job {job}` interrupts its instance now (--hard: no notice); "
                 "Ctrl-C or `python -m localcloud down` ends it all"):
        progress.message(line)


def create_secrets(cloud: LocalCloud, secrets: Iterable[tuple[SecretRef, str]]) -> None:
    """The job's secrets where its instances read them: an SSM SecureString, or a Secrets Manager secret."""
    for ref, value in secrets:
        if ref.service == SSM:
            cloud.client("ssm").put_parameter(Name=ref.name, Type="SecureString", Value=value, Overwrite=True)
        else:
            cloud.client("secretsmanager").create_secret(Name=ref.name, SecretString=value)
        cloud.log(f"secret {ref.env}: {ref.service}:{ref.name} created")


def keep_playing(cloud: LocalCloud, deployment: Deployment, inputs: UpInputs, session: Session,
                 progress: ProgressLine) -> None:
    """Play the job's groups whenever one wants instances, wait while all are at 0; only an interrupt ends this."""
    groups = RegionGroups(cloud, deployment)
    injector = Injector(inputs.plan, inputs.total_steps)  # one schedule over the job's whole life

    def tick(player: Player) -> None:
        progress(player)
        session.serve(lambda kind: said(interrupt_answer(player, kind)))

    def said(answer: str) -> str:
        progress.message(f"asked to interrupt: {answer}")
        return answer

    idle = f"no instance to interrupt: the group of job {deployment.job} is at 0"
    while True:
        if not any(group["DesiredCapacity"] for _, group in groups.groups()):
            session.serve(lambda kind: said(idle))
            time.sleep(IDLE_SECONDS)
            continue
        options = RunOptions(plan=inputs.plan, total_steps=inputs.total_steps, timeout_seconds=math.inf,
                             command_env=inputs.command_env, injector=injector)
        Player(cloud, deployment, options, on_tick=tick).run()
        progress.message(at_zero_line(cloud, deployment))


def interrupt_answer(player: Player, kind: str) -> str:
    """Interrupt the instance training now, as `python -m localcloud interrupt` asked; the line it prints."""
    if kind not in (ANNOUNCED, HARD):
        return f"unknown request {kind!r}"
    target = player.training_instance()
    if target is not None and player.market_of.get(target.instance_id) == ON_DEMAND:
        return f"instance {target.instance_id} runs on-demand: AWS does not reclaim on-demand capacity"
    target = player.interrupt_now(kind)
    if target is None:
        return "no instance is up yet: ask again once one boots"
    if kind == HARD:
        return f"instance {target.instance_id}: powered off without notice"
    return f"instance {target.instance_id}: spot interruption notice, {player.options.plan.notice_seconds:g}s to go"


def at_zero_line(cloud: LocalCloud, deployment: Deployment) -> str:
    """What up says once the group is at 0, and how the job goes on."""
    job = deployment.job
    state = (newest_status(cloud, deployment) or {}).get("state", "")
    if state in (JobState.DONE, JobState.FAILED):
        return (f"job {job} is {state} and its group at 0; `spot-trainer status --job {job}` tells more, "
                "Ctrl-C ends the local cloud")
    return (f"job {job}'s group is at 0, nothing deleted; `spot-trainer resume --job {job}` starts it again, "
            "Ctrl-C ends the local cloud")


def tear_down(cloud: LocalCloud, deployment: Deployment, progress: ProgressLine) -> None:
    """The stack destroyed with the CDK CLI while moto still answers; moto's own end takes the rest."""
    if cloud.moto is None or cloud.moto.process is None or cloud.moto.process.poll() is not None:
        progress.message("the local AWS had already stopped: the stack and its bucket went with it")
        return
    try:
        cloud.destroy(deployment)
    except CloudError as error:
        progress.message(f"localcloud up: {error}")
        return
    left = [s["StackName"] for place in deployment.every_region()
            for s in cloud.client("cloudformation", place.region).describe_stacks()["Stacks"]
            if s["StackName"] == place.stack]
    progress.message(f"destroyed {deployment.stack}" if not left else f"{deployment.stack} is still there")


def stop_leftovers(session: Session) -> int:
    """What an up that was itself killed left running (its instances' processes, its moto), then its files."""
    stopped = stop_instances(session.cloud_dir.glob("instances/i-*"))
    record = session.record() or {}
    moto = int(record.get("moto_pid", 0))
    if moto and process_alive(moto, "localcloud.moto_app"):
        signal_process(moto)
        stopped += 1
    shutil.rmtree(session.folder, ignore_errors=True)
    return stopped


def stop_instances(roots: Iterable[Path]) -> int:
    """Power off every instance sandbox given; how many processes were stopped."""
    stopped = 0
    for root in sorted(roots):
        if root.is_dir():
            leftover = Instance(root.name, "", root, {})
            stopped += len(leftover.processes())
            leftover.kill()
    return stopped


def signal_process(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def down(session: Session) -> str:
    """Ctrl-C for the job's up (it powers off, destroys and stops); a killed up's leftovers stopped instead."""
    if session.up_pid() is None:
        if not session.folder.exists():
            raise SessionError(f"no `python -m localcloud up` runs for job {session.job!r}")
        return f"job {session.job} was not up; stopped {stop_leftovers(session)} leftover processes"
    if not session.stop(DOWN_SECONDS):
        raise SessionError(f"the up of job {session.job!r} did not end within {DOWN_SECONDS:.0f}s")
    return f"job {session.job}: instances powered off, stack destroyed, local AWS stopped"
