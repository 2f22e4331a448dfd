"""Strict determinism's start-up check: a kernel torch cannot run deterministically stops the trainer
before training with one line naming it and the way out, and checking leaves the run untouched.

torch's deterministic mode is switched on here on the CPU, where `Tensor.put_` is such a kernel, as
`adaptive_avg_pool2d`'s CUDA backward is on a GPU: the refusal is torch's own, not a stand-in.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.utils.deterministic
from torch import nn

from spot_trainer.builtin.determinism import (
    OFF,
    STRICT,
    NotDeterministicError,
    check_kernels,
    configure_kernels,
    kernel_problem,
)
from spot_trainer.builtin.models import ByteLM
from spot_trainer.builtin_arguments import ArgumentsError, check_arguments


@pytest.fixture
def deterministic_mode() -> Iterator[None]:
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


class ScattersWithPut(nn.Module):
    """A model with an op that has no deterministic kernel (put_ without accumulate)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 256))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        scattered = torch.zeros(tokens.numel()).put_(tokens.flatten() % tokens.numel(), tokens.flatten().float())
        return (scattered.view(*tokens.shape, 1) * self.weight[: tokens.shape[1]]).view(*tokens.shape, 256)


def tokens(batch: int = 2, length: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    data = torch.randint(0, 256, (batch, length + 1), generator=torch.Generator().manual_seed(1))
    return data[:, :-1], data[:, 1:]


def test_a_kernel_without_a_deterministic_version_stops_training_at_start_with_one_line(
    deterministic_mode: None,
) -> None:
    with pytest.raises(NotDeterministicError) as raised:
        check_kernels(ScattersWithPut(), *tokens(), amp=None)
    message = str(raised.value)
    assert "\n" not in message
    assert "put_ has no deterministic kernel" in message and "--deterministic off" in message


def test_checking_leaves_the_weights_gradients_and_generators_as_they_were(deterministic_mode: None) -> None:
    torch.manual_seed(7)
    model = ByteLM(width=16, context=4)
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    generator = torch.get_rng_state()

    check_kernels(model, *tokens(), amp=None)  # dropout draws from the generator inside the check

    assert torch.equal(torch.get_rng_state(), generator)
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in weights.items())
    assert all(parameter.grad is None for parameter in model.parameters())


def test_nothing_is_checked_when_the_mode_is_off() -> None:
    assert not torch.are_deterministic_algorithms_enabled()
    check_kernels(ScattersWithPut(), *tokens(), amp=None)  # CPU, or --deterministic off on CUDA


def test_a_refusal_that_is_not_about_determinism_is_left_as_it_is(deterministic_mode: None) -> None:
    assert kernel_problem(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")) is None
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices'"):
        check_kernels(ByteLM(width=16, context=4), torch.zeros(2, 4), torch.zeros(2, 4), amp=None)


def test_strict_on_cuda_refuses_a_cublas_setting_that_is_not_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    with pytest.raises(NotDeterministicError, match=r"CUBLAS_WORKSPACE_CONFIG is ':0:0'.*--deterministic off"):
        configure_kernels(STRICT, torch.device("cuda"))  # refused before any CUDA call
    configure_kernels(OFF, torch.device("cpu"))
    assert not torch.are_deterministic_algorithms_enabled()


def test_strict_on_cuda_makes_kernels_deterministic_without_filling_every_new_tensor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        configure_kernels(STRICT, torch.device("cuda"))  # flags only: no CUDA call is made
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.backends.cudnn.benchmark
        assert not torch.utils.deterministic.fill_uninitialized_memory  # it cost the LM 13% on an H200
        configure_kernels(OFF, torch.device("cuda"))
        assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.backends.cudnn.benchmark = False


def test_the_trainer_takes_strict_or_off_and_names_the_choices_otherwise() -> None:
    job = ["--model", "lm", "--steps", "5", "--synthetic"]
    assert check_arguments(job).deterministic == STRICT
    assert check_arguments([*job, "--deterministic", "off"]).deterministic == OFF
    with pytest.raises(ArgumentsError, match=r"--deterministic: invalid choice: 'fast' \(choose from .*strict.*off"):
        check_arguments([*job, "--deterministic", "fast"])
