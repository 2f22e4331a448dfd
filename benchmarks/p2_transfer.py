"""P2: checkpoint upload and download throughput against one local moto server, ours vs common tools.

Starts moto server on 127.0.0.1, writes a checkpoint of random bytes, and times in the same run:
our RemoteStore (upload = objects + manifest + publish, download = restore with sha256 verification),
`aws s3 cp` (aws CLI v1), `s5cmd cp`, and boto3's default `upload_file`/`download_file`. Prints JSON.

    python benchmarks/p2_transfer.py [--mb 1024] [--repeat 3] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3

from stacks.help_text import first_paragraph

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.s3.s3client import (
    DEFAULT_CONCURRENCY,
    MB,
    s3_client,
    transfer_config,
    transfer_config_for,
    upload_config_for,
)
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402

BUCKET = "p2-transfer"
VENV_BIN = Path(sys.executable).parent
SWEEP = [(8, 10), (64, 8), (256, 4)]  # (chunk MB, concurrency), fixed instead of sized per transfer


def write_random(path: Path, megabytes: int) -> None:
    with open(path, "wb") as handle:
        for _ in range(megabytes):
            handle.write(os.urandom(MB))


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(argv: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({result.returncode}): {result.stderr.strip()[-300:]}")


def empty_bucket(s3: Any) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})


class Tools:
    """One upload and one download per tool, each leaving the bucket empty for the next."""

    def __init__(self, server: MotoServer, source: Path, work: Path) -> None:
        self.env = {**os.environ, **server.env(), "AWS_EC2_METADATA_DISABLED": "true"}
        os.environ.update(self.env)
        self.endpoint, self.source, self.work = server.endpoint, source, work
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint)

    def fresh_dest(self) -> Path:
        dest = self.work / "download"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        return dest

    def ours(
        self, chunk_mb: int | None = None, concurrency: int = DEFAULT_CONCURRENCY
    ) -> tuple[float, float]:
        """Our store; chunk_mb None = its default (parts sized per transfer)."""
        config = transfer_config(chunk_bytes=chunk_mb * MB, concurrency=concurrency) if chunk_mb else None
        client = s3_client(pool_connections=concurrency * 2)
        store = RemoteStore(client, BUCKET, f"ours-{chunk_mb}-{concurrency}", transfer_config=config)
        up = timed(lambda: store.upload(self.source, 1))
        restored: list[Path | None] = []
        down = timed(lambda: restored.append(store.restore(self.fresh_dest())))
        if restored[0] is None:
            raise RuntimeError("restore returned nothing")
        return up, down

    def aws_cli(self) -> tuple[float, float]:
        uri = f"s3://{BUCKET}/cli/{self.source.name}"
        base = [str(VENV_BIN / "aws"), "--endpoint-url", self.endpoint, "s3", "cp", "--only-show-errors"]
        up = timed(lambda: run([*base, str(self.source), uri], self.env))
        down = timed(lambda: run([*base, uri, str(self.fresh_dest() / self.source.name)], self.env))
        return up, down

    def s5cmd(self) -> tuple[float, float]:
        uri = f"s3://{BUCKET}/s5cmd/{self.source.name}"
        base = [str(VENV_BIN / "s5cmd"), "--endpoint-url", self.endpoint, "cp"]
        up = timed(lambda: run([*base, str(self.source), uri], self.env))
        down = timed(lambda: run([*base, uri, str(self.fresh_dest() / self.source.name)], self.env))
        return up, down

    def boto3_default(self) -> tuple[float, float]:
        key = f"boto3/{self.source.name}"
        up = timed(lambda: self.s3.upload_file(str(self.source), BUCKET, key))
        down = timed(lambda: self.s3.download_file(BUCKET, key, str(self.fresh_dest() / self.source.name)))
        return up, down


def summary(mb: int, ups: list[float], downs: list[float]) -> dict:
    """Median and best of the rounds: the median is the figure compared, the best shows the spread."""
    up, down = statistics.median(ups), statistics.median(downs)
    return {"upload_s": round(up, 2), "download_s": round(down, 2),
            "upload_MBps": round(mb / up, 1), "download_MBps": round(mb / down, 1),
            "best_upload_MBps": round(mb / min(ups), 1), "best_download_MBps": round(mb / min(downs), 1)}


def measure_rounds(actions: dict[str, Callable[[], tuple[float, float]]], tools: Tools, mb: int,
                   rounds: int) -> dict[str, dict]:
    """Every tool once per round, rounds interleaved, so a slow moment of the machine or a growing
    server hits all tools alike instead of whichever happened to run then."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in actions}
    for round_number in range(rounds):
        for name, action in actions.items():
            times[name].append(action())
            empty_bucket(tools.s3)
            print(f"round {round_number + 1} {name}: up {times[name][-1][0]:.2f}s down {times[name][-1][1]:.2f}s",
                  file=sys.stderr)
    return {name: summary(mb, [u for u, _ in pairs], [d for _, d in pairs]) for name, pairs in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--mb", type=int, default=1024, help="checkpoint size in MB (default 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds, median kept (default 3)")
    parser.add_argument("--sweep", action="store_true", help="also time other chunk/concurrency settings")
    args = parser.parse_args()
    if args.mb < 1 or args.repeat < 1:
        parser.error("--mb and --repeat must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="p2-"))
    try:
        source = work / "step-1.pt"
        write_random(source, args.mb)
        with MotoServer(log_path=work / "moto.log") as server:
            tools = Tools(server, source, work)
            tools.s3.create_bucket(Bucket=BUCKET)
            results = measure_rounds({"boto3_default": tools.boto3_default, "aws_cli": tools.aws_cli,
                                      "s5cmd": tools.s5cmd, "ours": tools.ours}, tools, args.mb, args.repeat)
            sweep = measure_rounds({f"chunk_{c}MB_concurrency_{n}": (lambda c=c, n=n: tools.ours(c, n))
                                    for c, n in (SWEEP if args.sweep else [])}, tools, args.mb, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    others = [results[name] for name in ("boto3_default", "aws_cli", "s5cmd")]
    best_up = max(r["upload_MBps"] for r in others)
    best_down = max(r["download_MBps"] for r in others)
    report = {
        "benchmark": "p2_transfer",
        "checkpoint_mb": args.mb,
        "rounds": args.repeat,
        "figure": "median of interleaved rounds (best_* = fastest round)",
        "ours_settings": {
            "upload": {"multipart_chunksize_mb": upload_config_for(args.mb * MB).multipart_chunksize // MB,
                       "max_concurrency": upload_config_for(args.mb * MB).max_concurrency},
            "download": {"multipart_chunksize_mb": transfer_config_for(args.mb * MB).multipart_chunksize // MB,
                         "max_concurrency": DEFAULT_CONCURRENCY},
            "rule": "uploads: 8 MiB parts (more when S3's part limit needs it); downloads: size/concurrency "
                    "clamped to 64..256 MiB",
            "includes": "upload: block sha256, manifest, conditional latest.json; restore: sha256 verify",
        },
        "results": results,
        "sweep": sweep,
        "ours_upload_vs_best_other": round(results["ours"]["upload_MBps"] / best_up, 2),
        "ours_download_vs_best_other": round(results["ours"]["download_MBps"] / best_down, 2),
        "ours_upload_vs_s5cmd": round(results["ours"]["upload_MBps"] / results["s5cmd"]["upload_MBps"], 2),
        "meets_target": (results["ours"]["upload_MBps"] >= best_up
                         and results["ours"]["download_MBps"] >= best_down),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
