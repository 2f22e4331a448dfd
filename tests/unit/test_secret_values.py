"""Reading a named secret: its value as text, and each way it cannot be had as one line naming it, final
(the job ends) when no restart would help, passing when AWS may answer next time."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from spot_trainer.agent.program.secret_values import SecretError, secret_environment


class Answers:
    """A client stand-in that answers each call with what it was given: a value or an error."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers

    def __getattr__(self, name: str) -> Any:
        def call(**_: Any) -> Any:
            answer = self.answers[name]
            if isinstance(answer, Exception):
                raise answer
            return answer
        return call


def denied(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, operation)


def test_values_of_both_services_by_their_names() -> None:
    clients = {"ssm": Answers(get_parameter={"Parameter": {"Value": "hf_1"}}),
               "secretsmanager": Answers(get_secret_value={"SecretString": "w_2"})}
    env = secret_environment("HF_TOKEN=ssm:/t/hf,WANDB_API_KEY=secretsmanager:w", clients.__getitem__)
    assert env == {"HF_TOKEN": "hf_1", "WANDB_API_KEY": "w_2"}


def test_no_secrets_asks_for_no_client() -> None:
    assert secret_environment("", lambda service: pytest.fail(f"asked for {service}")) == {}


def unavailable(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "later"}, "ResponseMetadata": {"HTTPStatusCode": 503}},
                       "GetSecretValue")


@pytest.mark.parametrize(("error", "final"), [
    (denied("AccessDeniedException", "GetSecretValue"), True),
    (denied("ResourceNotFoundException", "GetSecretValue"), True),
    (denied("InvalidRequestException", "GetSecretValue"), True),  # scheduled for deletion
    (denied("DecryptionFailure", "GetSecretValue"), True),
    (denied("AnErrorNotYetInvented", "GetSecretValue"), True),  # the secret's state, whatever it is
    (denied("ThrottlingException", "GetSecretValue"), False),
    (denied("InternalServiceError", "GetSecretValue"), False),
    (unavailable("SomethingUnavailable"), False),
    (EndpointConnectionError(endpoint_url="https://secretsmanager"), False),
])
def test_a_secret_that_cannot_be_read_is_one_line_final_when_no_restart_helps(error: Exception, final: bool) -> None:
    clients = {"secretsmanager": Answers(get_secret_value=error)}
    with pytest.raises(SecretError) as caught:
        secret_environment("WANDB_API_KEY=secretsmanager:w", clients.__getitem__)
    assert str(caught.value).startswith("secret WANDB_API_KEY (secretsmanager:w) cannot be read: ")
    assert "\n" not in str(caught.value) and caught.value.final is final


def test_a_binary_secret_is_refused_by_name() -> None:
    clients = {"secretsmanager": Answers(get_secret_value={"SecretBinary": b"\0"})}
    with pytest.raises(SecretError, match="holds binary data, not text"):
        secret_environment("KEY=secretsmanager:k", clients.__getitem__)


def test_a_secret_scheduled_for_deletion_names_the_fix() -> None:
    clients = {"secretsmanager": Answers(get_secret_value=denied("InvalidRequestException", "GetSecretValue"))}
    with pytest.raises(SecretError) as caught:
        secret_environment("WANDB_API_KEY=secretsmanager:w", clients.__getitem__)
    assert str(caught.value) == ("secret WANDB_API_KEY (secretsmanager:w) cannot be read: InvalidRequestException (it "
                                 "is scheduled for deletion or cannot be read in its state: restore it (aws "
                                 "secretsmanager restore-secret) or name another)")
