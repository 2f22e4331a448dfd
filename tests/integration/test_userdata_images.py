"""Every image the jobs name boots: user data uses the image's PyTorch env when it has one that fits the
job (installing nothing), or finds a Python the runtime runs on, or installs one with the image's own
package manager. Each image is played from its facts (localcloud/images.py): its commands only, no
Python newer than its own, its package manager; none of this machine's interpreters, except the
PyTorch env of an image that has one, played by this machine's interpreter with torch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from localcloud.fake_imds import FakeImds
from localcloud.images import IMAGES, ImageFacts
from localcloud.moto_server import MotoServer
from localcloud.wheels import make_wheel
from stacks.instance.runtime_wheel import runtime_wheel
from stacks.instance.user_data import render_user_data, script_body
from stacks.job.spec import CURRENT_USERDATA_VERSION, DEFAULT_AMI
from tests.support.userdata_sandbox import UserDataSandbox, job_header


@pytest.fixture(params=sorted(path for path, facts in IMAGES.items() if not facts.pytorch_env),
                ids=lambda path: IMAGES[path].name)
def image(request: pytest.FixtureRequest) -> ImageFacts:
    """An image without a PyTorch env (the default image, with one, has tests of its own below)."""
    return IMAGES[request.param]


def pytorch_env(root: Path, facts: ImageFacts) -> str:
    """The image's PyTorch env at its path below the sandbox: this machine's interpreter (with torch)."""
    assert facts.pytorch_env is not None
    python = root / facts.pytorch_env.lstrip("/")
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return str(python)


def boot(root: Path, moto: MotoServer, facts: ImageFacts, wheels: Path, **header: str) -> UserDataSandbox:
    make_wheel(wheels, "numpy", "2.0.0")  # installed with torch into a venv, as the built-in trainer needs it
    with FakeImds(instance_id="i-0image000000000001") as imds:
        candidates = pytorch_env(root, facts) if facts.pytorch_env else "/opt/pytorch/bin/python"
        sandbox = UserDataSandbox(root, moto.env(), imds.url, image=facts, overrides={
            # Offline: pip finds only the wheels of `wheels`. Without a PyTorch env, the venv's torch is
            # stood in for by the runtime's wheel (what matters is which Python the venv is made from).
            "SPOT_BASE_PYTHON": "", "SPOT_PYTHON_CANDIDATES": candidates, "SPOT_FAKE_GPU_COUNT": "1",
            "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"{runtime_wheel().parent} {wheels}", "PIP_NO_DEPS": "1"})
        if not facts.pytorch_env:
            header.setdefault("SPOT_TORCH_SPEC", "spot-trainer")
        result = sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, job_header(
            "image-bucket", "spot-trainer==0.2.0", SPOT_ENV_CACHE="false", **header)))
        sandbox.stop_agent()
        assert result.returncode == 0, sandbox.read(sandbox.log_file)
        return sandbox


@pytest.fixture
def booted(tmp_path: Path, moto_server: MotoServer, image: ImageFacts) -> UserDataSandbox:
    return boot(tmp_path / "instance", moto_server, image, tmp_path / "no-wheels")


def test_an_image_without_python_3_11_gets_it_from_its_own_package_manager(
    booted: UserDataSandbox, image: ImageFacts
) -> None:
    log = booted.log_file.read_text()
    assert f"[python-env]: no python3.11 or newer on this image; installing python3.11 with {image.package_manager}" \
        in log, log
    assert "[python-env]: COMPLETED" in log, log
    venv = booted.root / "opt/spot-trainer/venv"
    assert "version = 3.11" in (venv / "pyvenv.cfg").read_text()


def test_the_default_image_is_the_pytorch_dlami_and_its_env_runs_the_job_as_it_is(
    tmp_path: Path, moto_server: MotoServer
) -> None:
    assert DEFAULT_AMI == \
        "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.12-ubuntu-24.04/latest/ami-id"
    facts = IMAGES[DEFAULT_AMI]
    assert facts.pytorch_env == "/opt/pytorch/bin/python"
    # With no override, user data looks first where the release notes put the env.
    assert f"SPOT_PYTHON_CANDIDATES:-{facts.pytorch_env} " in script_body(CURRENT_USERDATA_VERSION)
    sandbox = boot(tmp_path / "instance", moto_server, facts, tmp_path / "no-wheels")
    log = sandbox.log_file.read_text()
    env_python = sandbox.root / "opt/pytorch/bin/python"
    assert f"[python-env]: python {env_python} with torch " in log, log
    assert "installing" not in log and not (sandbox.root / "opt/spot-trainer/venv").exists(), log
    assert f"ExecStart={env_python} -P -m spot_trainer agent" in sandbox.unit_file.read_text()


def test_a_job_that_pins_another_torch_than_the_images_gets_it_in_a_venv(
    tmp_path: Path, moto_server: MotoServer
) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "torch", "9.9.9")
    facts = IMAGES[DEFAULT_AMI]
    sandbox = boot(tmp_path / "instance", moto_server, facts, wheels, SPOT_TORCH_SPEC="torch==9.9.9",
                   SPOT_SETUP_COMMAND="python -c 'import torch; print(torch.__version__)' > torch.txt")
    log = sandbox.log_file.read_text()
    assert "no PyTorch env that fits; installing torch==9.9.9 into" in log, log
    venv = sandbox.root / "opt/spot-trainer/venv"
    assert (sandbox.root / "opt/spot-trainer/work/torch.txt").read_text().strip() == "9.9.9"
    assert f"ExecStart={venv}/bin/python3 -P -m spot_trainer agent" in sandbox.unit_file.read_text()


def test_a_torch_built_against_numpy_1_gets_numpy_1_beside_it(tmp_path: Path, moto_server: MotoServer) -> None:
    # torch before 2.3 cannot use NumPy 2's ABI: its .numpy() and the built-in trainer's numpy state would break.
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "torch", "2.1.2")
    make_wheel(wheels, "numpy", "1.26.4")
    sandbox = boot(tmp_path / "instance", moto_server, IMAGES[DEFAULT_AMI], wheels, SPOT_TORCH_SPEC="torch==2.1.2",
                   SPOT_SETUP_COMMAND="python -c 'import numpy; print(numpy.__version__)' > numpy.txt")
    assert (sandbox.root / "opt/spot-trainer/work/numpy.txt").read_text().strip() == "1.26.4"


def test_the_image_view_has_no_python_newer_than_its_own(tmp_path: Path) -> None:
    """The stand-in itself: without its package manager, no python3.11 for a bootstrap to find."""
    for facts in IMAGES.values():
        if int(facts.python3.split(".")[1]) >= 11:
            continue  # an image whose own python3 is 3.11 or newer
        sandbox = UserDataSandbox(tmp_path / facts.package_manager, {}, "http://127.0.0.1:9", image=facts)
        found = [folder for folder in sandbox.env()["PATH"].split(":") if (Path(folder) / "python3.11").exists()]
        assert found == [], found
