"""Every image the jobs name boots: user data finds a Python the runtime runs on, or installs one with the
image's own package manager. Each image is played from its facts (localcloud/images.py): its commands
only, no Python newer than its own, its package manager; none of this machine's interpreters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.fake_imds import FakeImds
from localcloud.images import IMAGES, ImageFacts
from localcloud.moto_server import MotoServer
from stacks.job_spec import CURRENT_USERDATA_VERSION
from stacks.runtime_wheel import runtime_wheel
from stacks.user_data import render_user_data
from tests.support.userdata_sandbox import UserDataSandbox, job_header


@pytest.fixture(params=sorted(IMAGES), ids=lambda path: IMAGES[path].name)
def image(request: pytest.FixtureRequest) -> ImageFacts:
    return IMAGES[request.param]


@pytest.fixture
def booted(tmp_path: Path, moto_server: MotoServer, image: ImageFacts, bucket: str) -> Iterator[UserDataSandbox]:
    wheels = runtime_wheel().parent
    with FakeImds(instance_id="i-0image000000000001") as imds:
        sandbox = UserDataSandbox(tmp_path / "instance", moto_server.env(), imds.url, image=image, overrides={
            # No PyTorch env on these images: the venv's torch is stood in for by a wheel pip finds offline
            # (what this test is about is which Python the venv is made from).
            "SPOT_BASE_PYTHON": "", "SPOT_PYTHON_CANDIDATES": "/opt/pytorch/bin/python3",
            "SPOT_TORCH_SPEC": "spot-trainer", "SPOT_FAKE_GPU_COUNT": "1",
            "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_NO_DEPS": "1"})
        sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, job_header(bucket, "spot-trainer==0.2.0")))
        try:
            yield sandbox
        finally:
            sandbox.stop_agent()


def test_an_image_without_python_3_11_gets_it_from_its_own_package_manager(
    booted: UserDataSandbox, image: ImageFacts
) -> None:
    log = booted.log_file.read_text()
    assert f"[python-env]: no python3.11 or newer on this image; installing python3.11 with {image.package_manager}" \
        in log, log
    assert "[python-env]: COMPLETED" in log, log
    venv = booted.root / "opt/spot-trainer/venv"
    assert "version = 3.11" in (venv / "pyvenv.cfg").read_text()


def test_the_image_view_has_no_python_newer_than_its_own(tmp_path: Path) -> None:
    """The stand-in itself: without its package manager, no python3.11 for a bootstrap to find."""
    for facts in IMAGES.values():
        sandbox = UserDataSandbox(tmp_path / facts.package_manager, {}, "http://127.0.0.1:9", image=facts)
        found = [folder for folder in sandbox.env()["PATH"].split(":") if (Path(folder) / "python3.11").exists()]
        assert found == [], found
