"""What the environment cache saves a replacement: user data run in the sandbox (moto as S3, fake IMDS,
the systemctl stand-in) on an image without a PyTorch env, for a job whose environment is torch (the
real CPU wheel, installed from a local folder) plus a typical requirements file (localcloud/wheels.py's
89 MB of real wheels, installed by its setup). Three boots: one with the cache off, the first with it on
(installs, then packs and uploads in the background while its agent starts), and a replacement (restores).
Each is timed from the start of user data (the instance's launch, less the OS's boot) to its agent
running; the first's pack and upload are timed until its record is in S3. Then the first's archive is
restored each way the room can, into a scratch folder, so their times compare on one machine: downloaded
to a file, hashed, then unpacked (by tarfile or GNU tar), or streamed into either as it downloads. Prints
JSON.

    python benchmarks/env_cache.py [--wheels /opt/wheels]   # a folder holding torch-2.13.0+cpu-*.whl

Without that wheel, a stand-in of its size (random bytes, so it packs worse than torch) takes its place.
pip installs without dependencies here (offline): torch's own (sympy, networkx, …) are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from localcloud.fake_imds import FakeImds  # noqa: E402
from localcloud.moto_server import MotoServer  # noqa: E402
from localcloud.wheels import make_wheel, typical_requirements  # noqa: E402
from spot_trainer.environment.archive import staging_beside  # noqa: E402
from spot_trainer.environment.extract import extract, gnu_tar  # noqa: E402
from spot_trainer.environment.key import sha256_of  # noqa: E402
from spot_trainer.environment.remote import download, reading  # noqa: E402
from stacks.instance.user_data import render_user_data  # noqa: E402
from stacks.job.spec import CURRENT_USERDATA_VERSION  # noqa: E402
from tests.support.userdata_sandbox import UNIT, UserDataSandbox, asset_key, build_trainer_wheel, job_header, zip_files  # noqa: E402, I001

BUCKET = "bench-env-cache"
TORCH = "torch==2.13.0+cpu"
TORCH_WHEEL_BYTES = 191_794_682  # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
STORE_BOUND_SECONDS = 900  # packing a torch environment on a busy machine


def boot(root: Path, moto: MotoServer, wheels: str, header: dict[str, str]) -> tuple[float, UserDataSandbox]:
    """Seconds from user data's start to its agent running (the unit's pid written)."""
    with FakeImds(instance_id=f"i-0{root.name:0>16}"[:19], ami_id="ami-0bench000000000001") as imds:
        sandbox = UserDataSandbox(root, moto.env(), imds.url, overrides={
            # No PyTorch env on this image: a venv from python3.11, torch installed into it.
            "SPOT_BASE_PYTHON": "", "SPOT_PYTHON_CANDIDATES": "/nonexistent/python3",
            "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "PIP_FIND_LINKS": wheels})
        started = time.time()
        result = sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, header), timeout=1800)
        if result.returncode != 0:
            raise SystemExit(f"bootstrap of {root.name} failed:\n{sandbox.read(sandbox.log_file)}")
        agent = (sandbox.run_dir / f"{UNIT}.pid").stat().st_mtime
        sandbox.stop_agent()
    return round(agent - started, 2), sandbox


def stored(sandbox: UserDataSandbox) -> dict[str, Any]:
    """The first instance's pack and upload, once its background store has said so in the log."""
    deadline = time.monotonic() + STORE_BOUND_SECONDS
    while time.monotonic() < deadline:
        lines = [line for line in sandbox.log_file.read_text().splitlines() if "[env-store]: environment " in line]
        done = [line for line in lines if "stored in" in line or "not stored" in line]
        if done:
            if "not stored" in done[-1]:
                raise SystemExit(done[-1])
            seconds = float(done[-1].rsplit(" in ", 1)[1].rstrip("s)"))
            size = int(done[-1].split("(")[1].split(" bytes")[0])
            return {"pack_and_upload_s": seconds, "archive_bytes": size}
        time.sleep(0.5)
    raise SystemExit(f"no store in {STORE_BOUND_SECONDS}s:\n{sandbox.log_file.read_text()}")


def streamed_seconds(sandbox: UserDataSandbox) -> dict[str, float]:
    """When a restore's download and its unpacking (which overlap) each ended, as its log line says."""
    line = next((x for x in sandbox.log_file.read_text().splitlines() if "environment restored from" in x), "")
    found = re.search(r"downloaded in ([\d.]+)s, unpacked in ([\d.]+)s", line)
    return {"with_cache_replacement_download_s": float(found[1]),
            "with_cache_replacement_unpack_s": float(found[2])} if found else {}


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return round(time.monotonic() - started, 2)


def restore_ways(uri: str, sha256: str, scratch: Path) -> dict[str, float]:
    """Seconds each way of restoring the archive at `uri` takes here, the environment unpacked whole."""
    tar = gnu_tar()
    if tar is None:
        raise SystemExit("no GNU tar and gzip on this machine: the comparison needs both")
    archive = scratch / "environment.tar.gz"

    def unpacked(source: IO[bytes], tool: str | None) -> None:
        with staging_beside(scratch / "app") as staging:
            passed = extract(source, staging, tar=tool)
            if passed.error or passed.sha256 != sha256:
                raise SystemExit(f"{passed.tool} did not unpack {uri}: {passed.error or 'its sha256 differs'}")

    def from_file(tool: str | None) -> None:
        with open(archive, "rb") as source:
            unpacked(source, tool)

    def streamed(tool: str | None) -> None:
        with reading(uri) as source:
            unpacked(source, tool)

    def drained() -> None:
        with reading(uri) as source:
            for _ in iter(lambda: source.read(1 << 20), b""):
                pass

    ways = {"download_to_file_s": timed(lambda: download(uri, archive)),
            "download_to_a_pipe_s": timed(drained),  # the stream alone, read and dropped
            "sha256_of_file_s": timed(lambda: sha256_of(archive)),
            "unpack_file_tarfile_s": timed(lambda: from_file(None)),
            "unpack_file_gnu_tar_s": timed(lambda: from_file(tar)),
            "streamed_tarfile_s": timed(lambda: streamed(None)),
            "streamed_gnu_tar_s": timed(lambda: streamed(tar))}
    ways["download_then_tarfile_s"] = round(  # the restore before streaming: download, hash, unpack
        ways["download_to_file_s"] + ways["sha256_of_file_s"] + ways["unpack_file_tarfile_s"], 2)
    return ways


def environment_seconds(sandbox: UserDataSandbox) -> float | None:
    phases = (sandbox.root / "var/lib/spot-trainer/boot-phases.jsonl")
    lines = [json.loads(line) for line in phases.read_text().splitlines()] if phases.exists() else []
    return next((p["seconds"] for p in lines if p["phase"] == "environment"), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path("/opt/wheels"), help="a folder with the torch wheel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MotoServer() as moto:
        work = Path(tmp)
        torch = "the real CPU wheel"
        if not list(args.wheels.glob("torch-2.13.0+cpu-*.whl")):  # a wheel of its size, random bytes
            make_wheel(work / "torch-stand-in", "torch", "2.13.0+cpu", payload_bytes=TORCH_WHEEL_BYTES)
            args.wheels, torch = work / "torch-stand-in", f"a stand-in wheel of {TORCH_WHEEL_BYTES} random bytes"
        s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket=BUCKET)
        wheel = build_trainer_wheel(work)
        s3.upload_file(str(wheel), BUCKET, asset_key(wheel))
        index = work / "index"
        requirements = typical_requirements(index)
        make_wheel(index, "numpy", "2.0.0")  # installed with torch (its size is the requirements' numpy-like's)
        code = zip_files({"requirements.txt": "\n".join(requirements) + "\n"}, work / "code.zip")
        s3.upload_file(str(code), BUCKET, "bench/code/code.zip")
        header = job_header(BUCKET, f"s3://{BUCKET}/{asset_key(wheel)}", SPOT_JOB="bench", SPOT_TORCH_SPEC=TORCH,
                            SPOT_COMMAND="sleep 600", SPOT_CODE_URI=f"s3://{BUCKET}/bench/code/code.zip",
                            SPOT_SETUP_COMMAND="pip install -q -r requirements.txt")
        wheels = f"{args.wheels} {index}"
        without, _ = boot(work / "nocache", moto, wheels, {**header, "SPOT_ENV_CACHE": "false"})
        first, first_box = boot(work / "first", moto, wheels, header)
        cost = stored(first_box)
        replacement, replacement_box = boot(work / "replacement", moto, wheels, header)
        first_environment, replacement_environment = environment_seconds(first_box), environment_seconds(
            replacement_box)
        streamed = streamed_seconds(replacement_box)
        key = next(item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="bench/env-cache/")["Contents"]
                   if item["Key"].endswith("/env.json"))
        sha256 = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())["sha256"]
        os.environ.update({**moto.env(), "SPOT_AWS_CLI": str(Path(sys.executable).parent / "aws")})
        ways = restore_ways(f"s3://{BUCKET}/{key.replace('env.json', sha256 + '.tar.gz')}", sha256, work / "ways")
    print(json.dumps({
        "benchmark": "env_cache",
        "what": f"{CURRENT_USERDATA_VERSION} user data in the sandbox on an image without a PyTorch env: a venv "
                f"with {TORCH} (local wheel) and a typical requirements file (12 packages, 89 MB of wheels) "
                "installed by run.setup; user data start → agent running",
        "torch": torch,
        "without_cache_s": without,
        "with_cache_first_s": first,
        "with_cache_first_environment_s": first_environment,
        "with_cache_replacement_s": replacement,
        "with_cache_replacement_environment_s": replacement_environment,
        **streamed,
        "replacement_vs_without": round(replacement / without, 3),
        **cost,
        "restore_ways": ways,
    }, indent=1))


if __name__ == "__main__":
    main()
