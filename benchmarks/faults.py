"""Run-time faults: what the real agent does with damaged records in S3, odd entries in its checkpoint
folder, a metadata service that misbehaves during a notice, a command that leaves processes behind, a
checkpoint folder with no inode left and file names S3 cannot take as they are.

Each case starts the agent process (`python -m spot_trainer agent`) against moto server and a local
IMDS on 127.0.0.1 (S3 through a proxy a case can make fail), with a shell command standing in for
training (on a tmpfs of few inodes where a case asks: run as root), and judges what it did:
  ok      the rule of docs/architecture.md's rules under faults held, in bounded time
  wrong   it did not (the reason says what happened)
  hangs   the agent did not finish within the case's bound (it is killed)
Prints tried / ok / wrong / hangs as JSON, with every case that is not ok. Servers and agents are
stopped at the end; everything is written under one temporary directory. Two to four minutes.

    .venv/bin/python benchmarks/faults.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import boto3  # noqa: E402

from localcloud.fake_imds import FakeImds  # noqa: E402
from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.s3.latest_record import LatestRecord  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402
from tests.integration.agent_runner import AgentProcess, agent_env  # noqa: E402
from tests.integration.remote_helpers import names_and_bytes  # noqa: E402
from tests.support.fault_commands import FULL_DISK, NOTHING_STORABLE, ODD_NAMES, UNTIL_STOPPED  # noqa: E402
from tests.support.s3_proxy import FaultProxy  # noqa: E402
from tests.support.tiny_fs import tiny_tmpfs  # noqa: E402

BOUND_SECONDS = 60.0  # no case may take longer
S3_OUTAGE_SECONDS = 20.0  # S3 answers only 503 for this long from the notice on
READY = 'trap "exit 0" TERM; echo ready; while true; do sleep 0.1; done'


@dataclass
class Run:
    store: RemoteStore
    folder: Path
    agent: AgentProcess
    imds: FakeImds
    s3: FaultProxy  # the agent's way to S3: forwards everything unless a case breaks it
    code: int | None = None
    seconds: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.agent.lines)

    def when(self, text: str) -> float | None:
        return self.agent.first_time(lambda line: text in line)


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    command: str
    judge: Callable[[Run], str]  # '' when the rule held, else what went wrong
    setup: Callable[[RemoteStore, Path], None] = lambda store, folder: None
    during: Callable[[Run], None] = lambda run: None
    settings: dict[str, str] = field(default_factory=dict)
    inodes: int | None = None  # the checkpoint folder is a tmpfs of this many inodes


# ---- set-ups -------------------------------------------------------------------------------------
def published(store: RemoteStore, folder: Path, *steps: int) -> None:
    for step in steps:
        saved = folder.parent / "before" / f"ckpt_{step}.pt"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_bytes(b"weights %d" % step)
        store.upload(saved, step)


def tampered_name(name: str) -> Callable[[RemoteStore, Path], None]:
    def setup(store: RemoteStore, folder: Path) -> None:
        published(store, folder, 10, 20)
        key = store.step_prefix(20) + "MANIFEST.json"
        manifest = store.get_json(key, absolute=True) or {}
        store.s3.put_object(Bucket=store.bucket, Key=key, Body=json.dumps({**manifest, "name": name}).encode())
        (folder.parent / "beside.txt").write_text("the user's")
    return setup


def latest_body(body: bytes) -> Callable[[RemoteStore, Path], None]:
    def setup(store: RemoteStore, folder: Path) -> None:
        published(store, folder, 10)
        store.s3.put_object(Bucket=store.bucket, Key=store.key("latest.json"), Body=body)
    return setup


def put(name: str, body: bytes) -> Callable[[RemoteStore, Path], None]:
    def setup(store: RemoteStore, folder: Path) -> None:
        store.s3.put_object(Bucket=store.bucket, Key=store.key(name), Body=body)
    return setup


def missing_named_step(store: RemoteStore, folder: Path) -> None:
    published(store, folder, 10)
    store.s3.put_object(Bucket=store.bucket, Key=store.key("latest.json"),
                        Body=LatestRecord.new(50, store.step_prefix(50), 0).to_json())


# ---- actions during a run -------------------------------------------------------------------------
def notice_when_ready(announce: Callable[[Run], None], ready: str = "ready") -> Callable[[Run], None]:
    def during(run: Run) -> None:
        run.agent.wait_for(lambda: run.said(ready), timeout=30, what=f"the line {ready!r}")
        run.marks["notice"] = time.monotonic()
        announce(run)
    return during


def s3_down_at_the_notice(run: Run) -> None:
    """Every S3 call fails with 503 SlowDown from the notice on, for S3_OUTAGE_SECONDS."""
    def heal() -> None:
        run.s3.fraction, run.s3.resets = 0.0, 0.5
    run.s3.fraction, run.s3.resets = 1.0, 0.0
    healer = threading.Timer(S3_OUTAGE_SECONDS, heal)
    healer.daemon = True
    healer.start()
    run.imds.announce_interruption()


def stopped_within(seconds: float) -> Callable[[Run], str]:
    def judge(run: Run) -> str:
        stopped = run.when("stopping the command")
        if stopped is None:
            return "no stop on the notice"
        late = stopped - run.marks["notice"]
        return "" if late <= seconds else f"stopped {late:.1f}s after the notice"
    return judge


# ---- judges --------------------------------------------------------------------------------------
def restored_inside(run: Run) -> str:
    if not (run.folder.parent / "beside.txt").exists():
        return "a file beside the checkpoint folder was deleted"
    return "" if run.said("ckpt_10.pt") and run.code == 0 else f"exit {run.code}, step 10 not restored"


def latest_is(step: int) -> Callable[[Run], str]:
    def judge(run: Run) -> str:
        found = run.store.latest_step()
        return "" if found == step and run.code == 0 else f"exit {run.code}, latest.json at {found}"
    return judge


def uploaded_names(run: Run) -> set[str]:
    listed = run.store.s3.list_objects_v2(Bucket=run.store.bucket, Prefix=run.store.key("checkpoints/"))
    return {item["Key"].rsplit("/", 1)[-1] for item in listed.get("Contents", [])}


def no_link_uploaded(run: Run) -> str:
    names = uploaded_names(run)
    if "creds" in names or "ckpt_7.pt" in names:
        return f"a link's target was uploaded: {sorted(names)}"
    return "" if run.said("links are never followed") else "the link was not named in the log"


def not_done_without_it(run: Run) -> str:
    """The job must not end DONE while its final checkpoint is only on a disk about to vanish."""
    status = run.store.get_json("status.json") or {}
    if status.get("state") != "FAILED" or "did not reach S3" not in str(status.get("reason")):
        return f"ended {status.get('state')} ({status.get('reason')!r})"
    kept = run.said("copy what")  # kept until the hook times out, or (no hook here) told to copy it now
    return "" if kept else "the instance was not kept for the checkpoint to be copied"


def restores(step: int, judge_copy: Callable[[Run, Path], str]) -> Callable[[Run], str]:
    """`step` is published and what a replacement restores of it passes `judge_copy`."""
    def judge(run: Run) -> str:
        found = run.store.latest_step()
        if found != step:
            return f"exit {run.code}, latest.json at {found}"
        restored = run.store.restore(run.folder.parent / "restored")
        return judge_copy(run, restored) if restored is not None else f"step {step} did not restore"
    return judge


def holds(content: bytes) -> Callable[[Run, Path], str]:
    return lambda run, restored: "" if restored.read_bytes() == content else f"restored {restored.read_bytes()!r}"


def same_names_and_bytes(run: Run, restored: Path) -> str:
    wanted, got = names_and_bytes(run.folder / restored.name), names_and_bytes(restored)
    return "" if got == wanted and wanted else f"restored {sorted(got)}, saved {sorted(wanted)}"


def warned_once(run: Run) -> str:
    """Uploads that keep failing: status.json's warning says why, and one event per cause."""
    warning = str((run.store.get_json("status.json") or {}).get("warning"))
    if not warning.startswith("checkpoint uploads are failing"):
        return f"status.json's warning: {warning!r}"
    failing = run.store.events("upload_failing")
    return "" if len(failing) == 1 else f"{len(failing)} upload_failing events"


def ended(code: int) -> Callable[[Run], str]:
    return lambda run: "" if run.code == code else f"exit {run.code}"


def cases() -> list[Case]:
    checkpoint_with_link = ('mkdir -p "$CHECKPOINT_DIR/ckpt_5" && echo w > "$CHECKPOINT_DIR/ckpt_5/model.pt" && '
                            'ln -s "$HOME/.bashrc" "$CHECKPOINT_DIR/ckpt_5/creds"; sleep 1; exit 0')
    fifos = ('mkdir -p "$CHECKPOINT_DIR/checkpoint-10" && mkfifo "$CHECKPOINT_DIR/checkpoint-10/trainer_state.json" '
             f'"$CHECKPOINT_DIR/last.ckpt"; {READY}')
    trains_to_20 = 'echo w > "$CHECKPOINT_DIR/ckpt_20.pt"; sleep 1; exit 0'
    return [
        Case("restore", "manifest name '..'", "ls \"$CHECKPOINT_DIR\"; exit 0", restored_inside, tampered_name("..")),
        Case("restore", "manifest name '.'", "ls \"$CHECKPOINT_DIR\"; exit 0", restored_inside, tampered_name(".")),
        Case("restore", "manifest name '../x'", "ls \"$CHECKPOINT_DIR\"; exit 0", restored_inside,
             tampered_name("../x")),
        Case("links", "a link inside a checkpoint", checkpoint_with_link, no_link_uploaded),
        Case("links", "a checkpoint that is a link", 'ln -s /etc/hostname "$CHECKPOINT_DIR/ckpt_7.pt"; sleep 1; exit 0',
             lambda run: "" if "ckpt_7.pt" not in uploaded_names(run) else "the link's target was uploaded"),
        Case("hangs", "FIFOs named trainer_state.json and last.ckpt, then a notice", fifos, stopped_within(3.0),
             during=notice_when_ready(lambda run: run.imds.announce_interruption())),
        Case("hangs", "processes left behind by a command that exited 0", "sleep 600 & echo started; exit 0",
             ended(0), settings={"grace_seconds": "3"}),
        Case("notice", "HTTP 500 from the metadata service as the notice comes", READY, stopped_within(3.0),
             during=notice_when_ready(lambda run: (run.imds.fail_gets(1), run.imds.announce_interruption()))),
        Case("notice", f"S3 answers only 503 for {S3_OUTAGE_SECONDS:.0f} s from the notice on", READY,
             stopped_within(3.0), during=notice_when_ready(s3_down_at_the_notice)),
        Case("notice", "spot/instance-action answers 200 with a body that is not JSON", READY, stopped_within(3.0),
             during=notice_when_ready(lambda run: run.imds.announce_raw_interruption("<html>terminate</html>"))),
        Case("records", "latest.json empty", trains_to_20, latest_is(20), latest_body(b"")),
        Case("records", "latest.json HTML", trains_to_20, latest_is(20), latest_body(b"<html>502</html>")),
        Case("records", 'latest.json {"step": "ten"}', trains_to_20, latest_is(20), latest_body(b'{"step": "ten"}')),
        Case("records", "latest.json null", trains_to_20, latest_is(20), latest_body(b"null")),
        Case("records", "latest.json {}", trains_to_20, latest_is(20), latest_body(b"{}")),
        Case("safe in S3", "latest.json names a step that is not there", trains_to_20, latest_is(20),
             missing_named_step),
        Case("records", "status.json HTML", "echo trained; exit 0", ended(0), put("status.json", b"<html>x</html>")),
        Case("records", "a lease with an expiry far ahead that nobody renews", "echo trained; exit 0", ended(0),
             put("lease.json", b'{"owner": "i-dead", "token": 3, "expires_at": 99999999999, "written_at": 0}')),
        Case("names", "a file name that is not UTF-8",
             'mkdir -p "$CHECKPOINT_DIR/ckpt_5" && echo w > "$CHECKPOINT_DIR/ckpt_5/model.pt" && '
             "echo x > \"$CHECKPOINT_DIR/ckpt_5/$(printf 'notes-\\377')\"; sleep 1; exit 0",
             restores(5, same_names_and_bytes)),
        Case("names", "names that are not UTF-8 in every checkpoint, a folder's too", ODD_NAMES,
             restores(30, same_names_and_bytes)),
        Case("safe in S3", "the final checkpoint cannot reach S3 (a key over 1024 bytes)", NOTHING_STORABLE,
             not_done_without_it),
        Case("said", "every checkpoint fails to upload", NOTHING_STORABLE, warned_once),
        Case("disk", "no inode left for staging, then a notice", FULL_DISK.format(wait=UNTIL_STOPPED),
             restores(11, holds(b"weights-11")), inodes=64,
             during=notice_when_ready(lambda run: run.imds.announce_interruption(), ready="step 10 failed: staging")),
        Case("disk", "no inode left for staging at the job's end", FULL_DISK.format(wait=""),
             restores(11, holds(b"weights-11")), inodes=64),
    ]


# ---- running -------------------------------------------------------------------------------------
def run_case(index: int, case: Case, server: MotoServer, bucket: str, root: Path) -> dict[str, Any]:
    job = f"fault-{index:02d}"
    folder = root / job / "checkpoints"
    folder.mkdir(parents=True)
    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    store = RemoteStore(s3, bucket, job)
    case.setup(store, folder)
    started = time.monotonic()
    with ExitStack() as disk, FakeImds(instance_id=f"i-{job}") as imds, FaultProxy(server.port) as proxy:
        if case.inodes is not None:
            disk.enter_context(tiny_tmpfs(folder, inodes=case.inodes, refused=refused))
        through_proxy = {**server.env(), "AWS_ENDPOINT_URL": proxy.endpoint}
        env = agent_env(through_proxy, bucket=bucket, job=job, checkpoint_dir=folder, imds_url=imds.url,
                        instance_id=f"i-{job}", command=case.command,
                        **{"grace_seconds": "10", "lease_ttl_seconds": "4", **case.settings})
        env["HOME"] = str(root / job)
        run = Run(store, folder, AgentProcess(env).start(), imds, proxy)
        outcome, reason = "ok", ""
        try:
            case.during(run)
            run.code = run.agent.wait(timeout=max(1.0, BOUND_SECONDS - (time.monotonic() - started)))
        except Exception as error:  # the bound ran out, or the command never got ready
            outcome, reason = "hangs", f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        finally:
            run.agent.stop()
        run.seconds = time.monotonic() - started
        if outcome == "ok":
            try:
                reason = case.judge(run)
            except Exception as error:  # what the agent left cannot even be read back
                reason = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            outcome = "wrong" if reason else "ok"
    return {"family": case.family, "case": case.name, "outcome": outcome, "reason": reason,
            "seconds": round(run.seconds, 1)}


def refused(why: str) -> NoReturn:
    raise SystemExit(why)


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="faults-") as directory, MotoServer() as server:
        root = Path(directory)
        bucket = "faults-benchmark"
        boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=bucket)
        results = [run_case(i, case, server, bucket, root) for i, case in enumerate(cases())]
    tally = Counter(result["outcome"] for result in results)
    print(json.dumps({
        "tried": len(results), "ok": tally["ok"], "wrong": tally["wrong"], "hangs": tally["hangs"],
        "longest_case_seconds": max(result["seconds"] for result in results),
        "seconds": round(time.monotonic() - started, 1),
        "by_family": {family: dict(Counter(r["outcome"] for r in results if r["family"] == family))
                      for family in dict.fromkeys(r["family"] for r in results)},
        "not_ok": [r for r in results if r["outcome"] != "ok"],
    }, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.exit(main())
