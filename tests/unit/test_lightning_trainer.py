"""What an unmodified Lightning script's Trainer is given under the agent. On a round of several nodes
it trains as one data-parallel world: left to itself, a `L.Trainer()` under torchrun takes num_nodes=1
and trains alone on each node (or, with a fixed num_nodes, refuses a round of any other size). And it
gets our SpotCheckpoint, once, so a notice costs no completed step."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from spot_trainer.integrations.auto_callback import add_to_lightning
from spot_trainer.integrations.lightning_nodes import follow_the_round


@pytest.fixture
def trainer_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Lightning's trainer module, in the variables torchrun gives a worker on the second of three
    nodes (one process per node); its Trainer is unpatched again after the test."""
    pytest.importorskip("lightning")  # here, not at collection: every test worker would pay for it
    from lightning.pytorch.trainer import trainer as module

    for name, value in {"TORCHELASTIC_RUN_ID": "job", "WORLD_SIZE": "3", "RANK": "1", "LOCAL_RANK": "0",
                        "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "3",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(module.Trainer, "__init__", module.Trainer.__init__)
    return module


def built(module: ModuleType, **arguments: object) -> Any:
    return module.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                          **arguments)


def test_a_trainer_for_one_node_trains_alone_unless_it_follows_the_round(trainer_module: ModuleType) -> None:
    alone = built(trainer_module)
    assert (alone.world_size, alone.global_rank) == (1, 0)  # every node its own rank 0: no data parallelism
    follow_the_round(trainer_module)
    together = built(trainer_module)
    assert (together.num_nodes, together.world_size, together.global_rank) == (3, 3, 1)
    assert type(together.strategy).__name__ == "DDPStrategy"


def test_a_fixed_node_count_gives_way_to_the_rounds(trainer_module: ModuleType, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    follow_the_round(trainer_module)
    assert built(trainer_module, num_nodes=2).num_nodes == 3
    assert "Lightning's num_nodes=2 replaced by 3, the nodes in this round" in capsys.readouterr().err


def test_a_trainer_gets_our_callback_once(trainer_module: ModuleType) -> None:
    from spot_trainer.integrations.lightning import SpotCheckpoint

    add_to_lightning(trainer_module)
    ours = SpotCheckpoint()
    for given, expected in ((None, None), ([ours], ours)):
        found = [callback for callback in built(trainer_module, callbacks=given).callbacks
                 if isinstance(callback, SpotCheckpoint)]
        assert len(found) == 1 and (expected is None or found[0] is expected), found
