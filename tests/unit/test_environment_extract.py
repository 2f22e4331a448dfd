"""An environment's archive unpacks as it streams, by GNU tar where the image has it and by tarfile where
not, with the same guarantees either way: nothing is written outside the staging folder whatever the
archive holds, an environment comes out whole or is refused, and the digest covers every byte."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from spot_trainer.environment import remote
from spot_trainer.environment.archive import pack, put_in_place, staging_beside
from spot_trainer.environment.extract import Passed, extract, gnu_tar
from spot_trainer.environment.remote import RemoteError, reading

TOOLS = {"GNU tar": gnu_tar(), "tarfile": None}
needs_gnu_tar = pytest.mark.skipif(TOOLS["GNU tar"] is None, reason="no GNU tar and gzip on this machine")
EACH_TOOL = [pytest.param("GNU tar", marks=needs_gnu_tar), "tarfile"]


def environment(app: Path) -> Path:
    (app / "venv" / "bin").mkdir(parents=True)
    (app / "venv" / "bin" / "python3").symlink_to(sys.executable)  # absolute, as a venv's is
    (app / "venv" / "bin" / "python").symlink_to("python3")
    (app / "venv" / "bin" / "tool").write_text("#!/bin/sh\n")
    (app / "venv" / "bin" / "tool").chmod(0o6755)  # set-id bits an archive must not bring
    (app / "lib").mkdir()
    (app / "lib" / "runtime.py").write_text("x = 1\n")
    return app


def unpacked(body: bytes, tool: str, into: Path) -> tuple[Passed, str]:
    """The stream unpacked into `into`'s staging folder and put in place; (what passed, why refused)."""
    with staging_beside(into) as staging:
        passed = extract(io.BytesIO(body), staging, tar=TOOLS[tool])
        try:
            if passed.error:
                raise ValueError(passed.error)
            put_in_place(staging, into)
        except (OSError, ValueError) as error:
            return passed, str(error)
    return passed, ""


@pytest.mark.parametrize("tool", EACH_TOOL)
def test_an_environment_comes_out_as_it_was_packed(tool: str, tmp_path: Path) -> None:
    archive = tmp_path / "env.tar.gz"
    pack(environment(tmp_path / "built"), archive)
    body = archive.read_bytes()
    passed, refused = unpacked(body, tool, tmp_path / "instance")
    assert refused == "" and passed.tool == tool and passed.sha256 == hashlib.sha256(body).hexdigest()
    venv = tmp_path / "instance" / "venv"
    assert os.readlink(venv / "bin" / "python3") == sys.executable and os.readlink(venv / "bin" / "python") == "python3"
    assert (tmp_path / "instance" / "lib" / "runtime.py").read_text() == "x = 1\n"
    assert stat.S_IMODE((venv / "bin" / "tool").stat().st_mode) & (stat.S_ISUID | stat.S_ISGID) == 0
    assert sorted(p.name for p in (tmp_path / "instance").iterdir()) == ["lib", "venv"]  # no staging left


def hostile(members: list[tuple[str, str, str]]) -> bytes:
    """A .tar.gz of (name, kind, link target or content) as no pack writes it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = value.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type, info.linkname = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                                            "hardlink": tarfile.LNKTYPE}[kind], value
                tar.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize("tool", EACH_TOOL)
@pytest.mark.parametrize("case", ["absolute link, then through it", "relative link, then through it",
                                  "dot-dot member", "absolute member", "hard link to a host file", "foreign top"])
def test_a_hostile_archive_writes_nothing_outside_and_is_refused(tool: str, case: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host-file").write_text("host\n")
    venv = [("venv/bin", "dir", ""), ("venv/bin/python3", "symlink", sys.executable), ("lib", "dir", "")]
    members = {
        "absolute link, then through it": [("venv/evil", "symlink", str(outside)), ("venv/evil/pwned", "file", "x")],
        "relative link, then through it": [("venv/evil", "symlink", "../../outside"), ("venv/evil/pwned", "file", "x")],
        "dot-dot member": [("venv/../../outside/pwned", "file", "x")],
        "absolute member": [(f"{outside}/pwned", "file", "x")],
        "hard link to a host file": [("venv/host-file", "hardlink", str(outside / "host-file"))],
        "foreign top": [("etc/pwned", "file", "x")],
    }[case]
    instance = tmp_path / "instance"
    passed, refused = unpacked(hostile(venv + members), tool, instance)
    assert refused, passed
    assert sorted(p.name for p in outside.iterdir()) == ["host-file"]
    assert (outside / "host-file").read_text() == "host\n"
    assert not instance.exists() or list(instance.iterdir()) == []


@pytest.mark.parametrize("tool", EACH_TOOL)
def test_an_archive_cut_short_is_refused_and_its_digest_is_of_every_byte(tool: str, tmp_path: Path) -> None:
    archive = tmp_path / "env.tar.gz"
    (tmp_path / "built" / "venv").mkdir(parents=True)
    environment(tmp_path / "built")
    (tmp_path / "built" / "venv" / "big.bin").write_bytes(os.urandom(2_000_000))
    pack(tmp_path / "built", archive)
    cut = archive.read_bytes()[: archive.stat().st_size // 2]
    target = tmp_path / "instance"
    (target / "lib").mkdir(parents=True)
    (target / "lib" / "kept.py").write_text("")
    passed, refused = unpacked(cut, tool, target)
    assert refused and passed.sha256 == hashlib.sha256(cut).hexdigest()
    assert sorted(p.name for p in target.iterdir()) == ["lib"] and (target / "lib" / "kept.py").exists()


def fake_cli(tmp_path: Path, body: str) -> str:
    cli = tmp_path / "aws"
    cli.write_text("#!/bin/bash\n" + body + "\n")
    cli.chmod(0o755)
    return str(cli)


def test_a_download_that_fails_midway_raises_once_its_bytes_are_read(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOT_AWS_CLI", fake_cli(tmp_path, "head -c 3000 /dev/zero; echo 'Connection reset' >&2; "
                                                          "exit 255"))
    with pytest.raises(RemoteError, match="^Connection reset$"), reading("s3://b/k") as stream:
        assert len(stream.read()) == 3000


def test_a_download_that_hangs_is_ended_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and what it started (here a `sleep` holding the pipe open) go at the bound: the reader sees EOF."""
    monkeypatch.setenv("SPOT_AWS_CLI", fake_cli(tmp_path, "head -c 10 /dev/zero; sleep 60; exit 0"))
    monkeypatch.setattr(remote, "CALL_SECONDS", 1)
    with pytest.raises(RemoteError, match="took over 1s"), reading("s3://b/k") as stream:
        assert stream.read() == b"\0" * 10


@needs_gnu_tar
@pytest.mark.parametrize("damage", ["not an archive", "a block rotten near its end"])
def test_an_archive_gnu_tar_refuses_is_refused_with_its_words(damage: str, tmp_path: Path) -> None:
    # gzip's complaints start with a blank line: the refusal must still be said, and nothing put in place.
    archive = tmp_path / "env.tar.gz"
    built = environment(tmp_path / "built")
    (built / "lib" / "big").write_bytes(os.urandom(3_000_000))
    pack(built, archive)
    body = bytearray(archive.read_bytes())
    if damage == "not an archive":
        body = bytearray(b"not an archive\n" * 10_000)
    else:
        body[-200_000:-199_000] = bytes(1000)
    passed, refused = unpacked(bytes(body), "GNU tar", tmp_path / "instance")
    assert passed.error and refused == passed.error
    assert not (tmp_path / "instance" / "lib").exists()


def test_a_tar_that_stalls_mid_stream_is_ended_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stalling = tmp_path / "tar"
    stalling.write_text("#!/bin/sh\nsleep 60\n")  # reads nothing: the pipe fills and the writer blocks
    stalling.chmod(0o755)
    monkeypatch.setattr("spot_trainer.environment.extract.UNPACK_SECONDS", 1.0)
    body = os.urandom(4 << 20)
    staging = tmp_path / "staging"
    staging.mkdir()
    passed = extract(io.BytesIO(body), staging, tar=str(stalling))
    assert passed.error == "tar did not finish within 1.0s"
    assert passed.sha256 == hashlib.sha256(body).hexdigest()  # every byte still read and hashed
