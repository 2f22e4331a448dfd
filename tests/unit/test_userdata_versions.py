"""The version table: every version on disk is in it, and every shared part is named by a version."""

from __future__ import annotations

from stacks.instance.user_data import SHARED_PARTS, USERDATA_ROOT, available_versions, part_paths
from stacks.instance.userdata_versions import USERDATA_VERSIONS


def test_every_version_on_disk_is_in_the_table() -> None:
    assert set(available_versions()) == set(USERDATA_VERSIONS)


def test_every_named_part_exists_once_and_every_part_is_named() -> None:
    named = {path for version in USERDATA_VERSIONS for path in part_paths(version)}
    assert all(path.is_file() for path in named)
    assert all(len(set(v.parts)) == len(v.parts) for v in USERDATA_VERSIONS.values())
    assert named == set((USERDATA_ROOT / SHARED_PARTS).glob("*.sh")), "a part no version renders"


def test_the_frozen_version_is_one_file() -> None:
    assert USERDATA_VERSIONS["v1"].parts == () and USERDATA_VERSIONS["v1"].heredoc_header
