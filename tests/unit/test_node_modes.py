"""The agent's two node modes stand side by side: neither imports the other, and the supervisor takes of
each only the `build` its folder exports, so a change to one mode cannot reach the other or the loop."""

from __future__ import annotations

from tests.unit.test_layering import MODULES, offenders, under

ONE_NODE, SEVERAL_NODES = "spot_trainer.agent.one_node", "spot_trainer.agent.several_nodes"


def test_the_two_node_modes_never_import_each_other() -> None:
    assert offenders(ONE_NODE, (SEVERAL_NODES,)) == []
    assert offenders(SEVERAL_NODES, (ONE_NODE,)) == []


def test_the_supervisor_takes_of_each_node_mode_only_its_builder() -> None:
    taken = sorted(target for target in MODULES["spot_trainer.agent.supervisor"]
                   if under(target, ONE_NODE) or under(target, SEVERAL_NODES))
    assert taken == [ONE_NODE, SEVERAL_NODES]
    for mode in (ONE_NODE, SEVERAL_NODES):
        assert f"{mode}.wiring.build" in MODULES[mode], f"{mode} exports its build"
