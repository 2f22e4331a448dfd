"""The environment cache's room run by a real Python 3.9, Amazon Linux 2023's python3, as user data runs
it: from the runtime's wheel on PYTHONPATH, before anything is installed, against S3 (moto) through the
aws CLI. A first instance misses and stores what it built; a second restores it; a damaged archive and
one that does not unpack each make an instance install, with one line saying why."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.interpreters import python_of_version
from localcloud.moto_server import MotoServer
from spot_trainer.environment.archive import pack
from stacks.instance.runtime_wheel import runtime_wheel
from stacks.job.spec import CURRENT_USERDATA_VERSION

PYTHON39 = python_of_version("3.9")
pytestmark = pytest.mark.skipif(PYTHON39 is None, reason="no Python 3.9 on this machine (python3.9 on the PATH "
                                "or pyenv's 3.9.*), the python3 of Amazon Linux 2023 that restores the cache")
JOB = "py39"


@dataclass
class Room:
    """`python3.9 -m spot_trainer.environment` with an instance's folders and the job's settings."""

    root: Path
    env: dict[str, str]
    s3: Any
    bucket: str

    def run(self, instance: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        app, state = self.root / instance / "app", self.root / instance / "state"
        state.mkdir(parents=True, exist_ok=True)
        return subprocess.run([str(PYTHON39), "-m", "spot_trainer.environment", *args, "--app-dir", str(app),
                               "--state-dir", str(state)], env={**self.env, **env}, capture_output=True, text=True,
                              timeout=120)

    def restore(self, instance: str, **env: str) -> subprocess.CompletedProcess[str]:
        return self.run(instance, "restore", "--wheel", self.env["PYTHONPATH"], "--image", "ami-0al2023000000001",
                        **env)

    def record(self) -> tuple[str, dict[str, Any]]:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{JOB}/env-cache/")["Contents"]
        (key,) = [item["Key"] for item in listed if item["Key"].endswith("/env.json")]
        return key, json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def put_archive(self, body: bytes) -> str:
        """An archive of `body` under its own sha256, named by the record (as a store writes them)."""
        key, record = self.record()
        sha = hashlib.sha256(body).hexdigest()
        archive = key.replace("env.json", f"{sha}.tar.gz")
        self.s3.put_object(Bucket=self.bucket, Key=archive, Body=body)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps({**record, "sha256": sha}).encode())
        return archive


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory, moto_server: MotoServer) -> Room:
    root = tmp_path_factory.mktemp("py39")
    aws = moto_server.env()
    s3 = boto3.client("s3", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = f"py39-{int(time.time() * 1000)}"
    s3.create_bucket(Bucket=bucket)
    env = {**aws, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(runtime_wheel()), "SPOT_BUCKET": bucket,
           "SPOT_JOB": JOB, "SPOT_USERDATA_VERSION": CURRENT_USERDATA_VERSION, "SPOT_TORCH_SPEC": "",
           "SPOT_SETUP_COMMAND": "pip install -r requirements.txt",
           "SPOT_AWS_CLI": str(Path(sys.executable).parent / "aws")}
    return Room(root, env, s3, bucket)


def build(app: Path) -> None:
    """What the installs would leave: a venv whose python3 links to its base, the runtime beside it."""
    subprocess.run([str(PYTHON39), "-m", "venv", "--without-pip", str(app / "venv")], check=True, timeout=60)
    (app / "venv/lib/job_module.py").write_text("ANSWER = 42\n")
    (app / "lib/spot_trainer").mkdir(parents=True)
    (app / "lib/spot_trainer/__init__.py").write_text("__version__ = '0.2.0'\n")


@pytest.fixture(scope="module")
def stored(room: Room) -> str:
    """The first instance: a miss, its build, then its store (packed in the background, as user data does)."""
    missed = room.restore("first")
    assert missed.returncode == 1 and "environment cache: none yet for key" in missed.stdout, missed
    app = room.root / "first/app"
    build(app)
    log = room.root / "first/bootstrap.log"
    log.touch()
    began = room.run("first", "store", "--python", str(app / "venv/bin/python3"), "--log", str(log))
    assert began.returncode == 0 and "environment built in" in began.stdout, began
    deadline = time.monotonic() + 60
    while "[env-store]" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    return log.read_text()


def test_a_first_instance_stores_what_it_built(room: Room, stored: str) -> None:
    assert "[env-store]: environment stored in s3://" in stored, stored
    _, record = room.record()
    assert record["bytes"] > 0 and len(record["sha256"]) == 64


def test_a_replacement_restores_it(room: Room, stored: str) -> None:
    done = room.restore("replacement")
    assert done.returncode == 0 and done.stdout.startswith("environment restored from s3://"), done
    app = room.root / "replacement/app"
    assert (app / "venv/lib/job_module.py").read_text() == "ANSWER = 42\n"
    assert (app / "venv/bin/python3").is_symlink()  # a venv's link to its base Python kept as a link
    restored = subprocess.run([str(app / "venv/bin/python3"), "-c", "import sys; print(sys.prefix)"],
                              capture_output=True, text=True, timeout=60)
    assert restored.stdout.strip() == str(app / "venv"), restored
    phases = [json.loads(line) for line in (room.root / "replacement/state/boot-phases.jsonl").read_text().splitlines()]
    assert [(p["phase"], p["how"]) for p in phases] == [("environment", "restored")]
    again = room.restore("replacement")  # its key is on the instance now: nothing to download
    assert again.returncode == 0 and "already on this instance" in again.stdout, again


def test_a_damaged_archive_is_installed_over_with_one_line(room: Room, stored: str) -> None:
    key, record = room.record()
    room.s3.put_object(Bucket=room.bucket, Key=key.replace("env.json", f"{record['sha256']}.tar.gz"), Body=b"junk")
    done = room.restore("after-damage")
    assert done.returncode == 1 and done.stdout.count("\n") == 1, done
    assert "is damaged (its sha256 is not the one env.json names); installing instead" in done.stdout, done
    assert not (room.root / "after-damage/app/venv").exists()


def tar_gz(folder: Path, name: str, into: Path) -> bytes:
    with tarfile.open(into, "w:gz") as tar:
        tar.add(folder, arcname=name)
    return into.read_bytes()


def test_an_archive_that_does_not_unpack_is_installed_over_with_one_line(
    room: Room, stored: str, tmp_path: Path
) -> None:
    """Whole and checksummed, yet cut short or holding what an environment never holds."""
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv/big.bin").write_bytes(os.urandom(1_000_000))
    cut_short = tar_gz(tmp_path / "venv", "venv", tmp_path / "venv.tar.gz")[:500_000]
    outside = tar_gz(tmp_path / "venv", "etc", tmp_path / "etc.tar.gz")
    for instance, body, reason in (("cut-short", cut_short, "does not unpack"),
                                   ("outside", outside, "the archive holds etc, outside venv and lib")):
        archive = room.put_archive(body)
        done = room.restore(instance)
        assert done.returncode == 1 and done.stdout.count("\n") == 1, done
        assert f"{archive} does not unpack" in done.stdout and reason in done.stdout, done
        assert "installing instead" in done.stdout and not (room.root / instance / "app/venv").exists(), done



def cutting_cli(tmp_path: Path, real_cli: str, *, exit_status: int) -> str:
    """The aws CLI, but a download to stdout stops after 100 kB: the connection dropped (the CLI fails),
    or the CLI said nothing of it (exits 0 on a short stream)."""
    cli = tmp_path / "aws"
    cli.write_text(f"""#!/bin/bash
if [[ "$1 $2" == "s3 cp" && "${{*: -1}}" == "-" ]]; then
  "{real_cli}" "$@" | head -c 100000
  echo "Connection was closed before we received a valid response" >&2
  exit {exit_status}
fi
exec "{real_cli}" "$@"
""")
    cli.chmod(0o755)
    return str(cli)


@pytest.mark.parametrize("exit_status, reason", [
    (255, "cannot be read (Connection was closed before we received a valid response)"),
    (0, "is damaged (its sha256 is not the one env.json names)")])
def test_a_stream_cut_short_mid_download_leaves_no_environment_and_installs_with_one_line(
    room: Room, stored: str, tmp_path: Path, exit_status: int, reason: str
) -> None:
    build(tmp_path / "built")
    (tmp_path / "built/venv/big.bin").write_bytes(os.urandom(1_000_000))
    pack(tmp_path / "built", tmp_path / "env.tar.gz")
    archive = room.put_archive((tmp_path / "env.tar.gz").read_bytes())
    instance = f"cut-{exit_status}"
    app = room.root / instance / "app"
    (app / "venv").mkdir(parents=True)  # what this instance had stays as it was
    (app / "venv/kept").write_text("")
    done = room.restore(instance, SPOT_AWS_CLI=cutting_cli(tmp_path, room.env["SPOT_AWS_CLI"], exit_status=exit_status))
    assert done.returncode == 1 and done.stdout.count("\n") == 1, done
    assert f"{archive} {reason}; installing instead" in done.stdout, done
    assert sorted(os.listdir(app)) == ["venv"] and os.listdir(app / "venv") == ["kept"]


def test_an_image_without_gnu_tar_restores_with_tarfile(room: Room, stored: str, tmp_path: Path) -> None:
    build(tmp_path / "built")
    pack(tmp_path / "built", tmp_path / "env.tar.gz")
    room.put_archive((tmp_path / "env.tar.gz").read_bytes())
    done = room.restore("no-tar", PATH=str(tmp_path / "empty"))  # no tar, no gzip
    assert done.returncode == 0 and "streamed into tarfile" in done.stdout, done
    assert (room.root / "no-tar/app/venv/lib/job_module.py").read_text() == "ANSWER = 42\n"
