"""The agent and the callbacks in the command read SPOT_STOP_SIGNAL alike: whatever spelling a job
gives, the signal the agent sends is the one the callbacks wait for, so a notice is a save."""

from __future__ import annotations

import os
import signal

import pytest

from spot_trainer.integrations.stop_request import StopRequest
from spot_trainer.signals import parse_signal


@pytest.mark.parametrize("value", ["10", "USR1", "sigusr1", " SIGUSR1 "])
def test_the_callbacks_hear_the_signal_the_agent_sends(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOT_STOP_SIGNAL", value)
    sent = parse_signal(value)  # what the agent sends
    request = StopRequest.for_agent()
    assert request.signum == sent == signal.SIGUSR1
    before = signal.getsignal(sent)
    try:
        request.install()
        os.kill(os.getpid(), sent)
        assert request.received and request.exit_code == 128 + 10
    finally:
        signal.signal(sent, before)


@pytest.mark.parametrize("value", ["SIGNOPE", "0", "99", ""])
def test_a_name_that_is_no_signal_is_named(value: str) -> None:
    with pytest.raises(ValueError, match="unknown signal"):
        parse_signal(value)
