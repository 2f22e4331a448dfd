"""A file's name as an S3 key: unchanged when it can be, else escaped, and never two names on one key."""

from __future__ import annotations

import base64
import os
from urllib.parse import unquote_to_bytes

import pytest

from spot_trainer.storage.s3.key_names import KEY_LIMIT_BYTES, key_name, local_name, manifest_fields, too_long

ODD_NAMES = [b"w\xff.bin", b"caf\xc3\xa9/\xe9t\xe9.txt", b"100%.txt", b"%FF", b"tab\there", b"bell\x07\x7f",
             b"\xed\xa0\x80 an encoded surrogate", b"\xc3 half a character", b"sub\xfe/inner\xff"]


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer/state.pt", "rng_state_0.pth", "café/été.txt",
                                  "trainer_state.json", "日本語.bin", "a b+c=d;e.pt"])
def test_a_name_s3_can_take_keeps_its_key_and_needs_nothing_in_the_manifest(name: str) -> None:
    assert key_name(name) == name
    assert manifest_fields(name, name) == {}
    assert local_name(name, {"size": 1}) == name  # a manifest written before the escape existed


@pytest.mark.parametrize("raw", ODD_NAMES)
def test_every_other_name_is_escaped_reversibly_and_kept_in_the_manifest(raw: bytes) -> None:
    name = os.fsdecode(raw)
    key = key_name(name)
    key.encode("utf-8")  # what S3 needs: raises if it is not valid UTF-8
    assert not any(ord(char) < 0x20 or ord(char) == 0x7F for char in key)
    assert unquote_to_bytes(key) == raw, "the documented escape decodes back to the very bytes"
    entry = {"size": 1, **manifest_fields(name, key)}
    assert base64.b64decode(entry["path_b64"]) == raw
    assert os.fsencode(local_name(key, entry)) == raw


def test_two_different_names_never_share_a_key() -> None:
    names = [os.fsdecode(raw) for raw in ODD_NAMES] + ["w%FF.bin", "100%25.txt", "%25FF"]
    assert len({key_name(name) for name in names}) == len(names)


def test_the_key_limit_is_counted_in_utf8_bytes() -> None:
    assert not too_long("a" * KEY_LIMIT_BYTES)
    assert too_long("é" * (KEY_LIMIT_BYTES // 2 + 1))


def test_bytes_in_a_manifest_that_are_not_base64_are_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="is not base64"):
        local_name("w%FF.bin", {"path_b64": "not base64!"})
    with pytest.raises(ValueError, match="is not text"):
        local_name("w%FF.bin", {"path_b64": 7})
