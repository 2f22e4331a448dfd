"""An instance of the local spot cloud holds only its instance profile's credentials, served by its
IMDS under iam/security-credentials/<role> and found there by the SDK, as on EC2."""

from __future__ import annotations

from pathlib import Path

import botocore.session
import pytest

from localcloud.fake_imds import FakeImds, RoleCredentials
from localcloud.instance import Instance
from localcloud.moto_server import DUMMY_CREDENTIALS

ROLE = RoleCredentials(role_name="SpotTrainer-example-TrainerRole-1", access_key_id="ASIAEXAMPLE",
                       secret_access_key="secret", token="token", expiration="2099-01-01T00:00:00Z")


def test_the_sdk_finds_the_role_credentials_in_the_instance_metadata(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (*DUMMY_CREDENTIALS, "AWS_EC2_METADATA_DISABLED", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with FakeImds(role=ROLE) as imds:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
        found = botocore.session.Session().get_credentials()
    assert found is not None and found.method == "iam-role"
    assert (found.access_key, found.secret_key, found.token) == ("ASIAEXAMPLE", "secret", "token")


def test_an_instance_with_a_role_gets_no_other_credentials(tmp_path: Path) -> None:
    deployer = {**DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL": "http://localhost:5000"}
    instance = Instance("i-0abc", "c7i.xlarge", tmp_path, deployer, role=ROLE)
    instance.imds = FakeImds(role=ROLE)
    env = instance.env()
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & env.keys()
    assert env["AWS_ENDPOINT_URL"] == "http://localhost:5000"
