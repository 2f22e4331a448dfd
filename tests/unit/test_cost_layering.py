"""The costs room imports only the standard library, boto3's world and checkpoint storage (to read
records): the status command, the agent and the local cloud all use it, so it depends on none of them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COSTS = ROOT / "spot_trainer" / "costs"
ALLOWED_RELATIVE = ("", "storage")  # `.x` inside the room, `..storage.x`


def outside_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            if (node.module or "").split(".")[0] not in ALLOWED_RELATIVE:
                found.append(f"{path.name}: ..{node.module}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append(f"{path.name}: {node.module}")
        elif isinstance(node, ast.Import):
            found.extend(f"{path.name}: {alias.name}" for alias in node.names)
    return found


def is_stdlib(name: str) -> bool:
    import sys

    return name.split(".")[0] in sys.stdlib_module_names


def test_the_costs_room_imports_stdlib_and_storage_only() -> None:
    offenders = [hit for path in sorted(COSTS.glob("*.py")) for hit in outside_imports(path)
                 if not is_stdlib(hit.split(": ")[1])]
    assert offenders == []


def test_the_room_states_its_contract_and_ships_in_the_wheel() -> None:
    doc = ast.get_docstring(ast.parse((COSTS / "__init__.py").read_text()))
    assert doc and "never `spot_trainer.agent`" in doc
    assert '"spot_trainer.costs"' in (ROOT / "pyproject.toml").read_text()
