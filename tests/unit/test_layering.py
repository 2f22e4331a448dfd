"""The rooms of the runtime and the wings of the stack import one way, and nothing in the product imports
in a circle.

Read from the source with `ast` (imports inside functions count too), so a lazy import cannot
hide a wrong dependency; one check imports the agent for real and looks for torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("spot_trainer", "stacks")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a `from` import names; relative ones are resolved against the importer."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")[: None if is_package else -1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, absolute names (a `from a import b` names a.b when b is a module)."""
    found: set[str] = set()
    importer, is_package = module_name(path), path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = absolute(node, importer, is_package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def product_modules() -> dict[str, set[str]]:
    files = [p for package in PRODUCT for p in (ROOT / package).rglob("*.py")] + [ROOT / "app.py"]
    return {module_name(p): imports_of(p) for p in files}


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


MODULES = product_modules()


def offenders(package: str, forbidden: tuple[str, ...], *, allow: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in MODULES.items()
        if under(module, package) and module not in allow
        for target in targets
        if any(under(target, f) for f in forbidden)
    )


def test_the_rooms_exist_with_their_contract_written_down() -> None:
    for room in ("agent", "storage", "builtin", "integrations", "distributed", "capacity", "costs", "ops"):
        init = ROOT / "spot_trainer" / room / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc, f"spot_trainer/{room}/__init__.py must say what it owns and may import"


def test_the_training_program_knows_nothing_of_the_agent() -> None:
    assert offenders("spot_trainer.builtin", ("spot_trainer.agent",)) == []
    assert offenders("spot_trainer.integrations",
                     ("spot_trainer.agent", "spot_trainer.builtin", "spot_trainer.storage")) == []


def test_storage_knows_nothing_of_the_agent_the_program_or_torch_but_the_local_serializer() -> None:
    assert offenders("spot_trainer.storage", ("spot_trainer.agent", "spot_trainer.builtin")) == []
    assert offenders("spot_trainer.storage", ("torch", "numpy"), allow=("spot_trainer.storage.files.local",)) == []


# The round the rendezvous formed is written by the launcher and read by the agent: its record is the one module of
# the rendezvous's room the agent may import, and the room's __init__ imports nothing, so it loads no torch.
ROUND_RECORD = "spot_trainer.distributed.rounds"


def test_the_agent_never_imports_the_training_program_or_torch() -> None:
    rendezvous = tuple(m for m in MODULES if under(m, "spot_trainer.distributed")
                       and m not in ("spot_trainer.distributed", ROUND_RECORD))
    assert offenders("spot_trainer.agent", ("spot_trainer.builtin", "spot_trainer.storage.files.local", *rendezvous,
                                       "torch", "numpy")) == []
    assert MODULES["spot_trainer.distributed"] <= {"__future__", "__future__.annotations"}
    assert offenders(ROUND_RECORD, ("spot_trainer", "torch")) == []


ROOMS = tuple(f"spot_trainer.{p.parent.name}" for p in sorted((ROOT / "spot_trainer").glob("*/__init__.py")))
# What several rooms share (the settings table, names, the built-in trainer's command line) lives at the top of
# the runtime, the shelf, and leans on nothing below it; only the command line's entry point reaches down.
SHELF = tuple(m for m in MODULES if m.count(".") == 1 and m.startswith("spot_trainer.")
              and m not in (*ROOMS, "spot_trainer.__main__"))


def test_the_annex_imports_no_room_and_no_torch() -> None:
    assert "spot_trainer.settings" in SHELF and "spot_trainer.builtin_arguments" in SHELF
    assert [line for module in SHELF for line in offenders(module, (*ROOMS, "torch", "numpy"))] == []


def test_the_shelf_stays_small() -> None:
    # What is not shared by several rooms lives in the room that owns it.
    assert len(SHELF) <= 8, sorted(SHELF)


# agent/ and storage/ in wings, each importing only those below it (the agent's two node modes on top, side by
# side: test_node_modes.py). No wing imports its room's root, but storage's root: the vocabulary all speak.
ROOM_WINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "spot_trainer.agent": {
        "instance": (),
        "records": ("instance",),
        "watches": ("instance", "records"),
        "program": ("instance", "records", "watches"),
        "node": ("instance", "records", "watches", "program"),
        **dict.fromkeys(("one_node", "several_nodes"), ("instance", "records", "watches", "program", "node")),
    },
    "spot_trainer.storage": {
        "files": (),
        "s3": ("files",),
        "saves": ("files", "s3"),
        "steps": ("files", "s3", "saves"),
    },
}
STORAGE_VOCABULARY = ("spot_trainer.storage.record_kinds", "spot_trainer.storage.failure_causes",
                      "spot_trainer.storage.upload_outcome", "spot_trainer.storage.checkpoint_versions")


def room_root(room: str) -> tuple[str, ...]:
    return tuple(m for m in MODULES if m.startswith(room + ".") and m.count(".") == room.count(".") + 1
                 and m.rsplit(".", 1)[1] not in ROOM_WINGS[room])


@pytest.mark.parametrize("room", ROOM_WINGS)
def test_each_wing_of_a_room_says_what_it_owns_and_may_import(room: str) -> None:
    wings = {p.parent.name for p in (ROOT / room.replace(".", "/")).glob("*/__init__.py")}
    assert wings == set(ROOM_WINGS[room])
    for wing in wings:
        init = ROOT / room.replace(".", "/") / wing / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc, f"{init.relative_to(ROOT)} must say what it owns and may import"


@pytest.mark.parametrize("room", ROOM_WINGS)
def test_no_wing_of_a_room_imports_one_above_it_or_the_room_s_root(room: str) -> None:
    root = tuple(m for m in room_root(room) if m not in STORAGE_VOCABULARY)
    for wing, below in ROOM_WINGS[room].items():
        above = tuple(f"{room}.{w}" for w in ROOM_WINGS[room] if w != wing and w not in below)
        assert offenders(f"{room}.{wing}", (*above, *root)) == [], wing


def test_storage_s_root_is_its_vocabulary_and_speaks_no_wing() -> None:
    assert set(room_root("spot_trainer.storage")) == set(STORAGE_VOCABULARY)
    assert [line for module in STORAGE_VOCABULARY for line in offenders(module, ("spot_trainer",))] == []


def test_the_rendezvous_knows_nothing_of_the_agent_or_the_program() -> None:
    # The agent starts it as a process (torchrun); the training program meets it only as a torch world.
    assert offenders("spot_trainer.distributed", ("spot_trainer.agent", "spot_trainer.builtin",
                                                  "spot_trainer.storage.files.local")) == []


# The regions controller finds the newest checkpoint by each region's latest.json, read as the store writes it:
# that record's two leaves, which import nothing of the runtime, are all of storage the capacity room may read.
LATEST_RECORD = ("spot_trainer.storage.s3.latest_record", "spot_trainer.storage.s3.json_object")


def test_the_market_policy_and_the_cost_room_know_nothing_of_the_agent() -> None:
    reached = [*offenders("spot_trainer.capacity", ("spot_trainer.agent", "spot_trainer.storage",
                                                   "spot_trainer.builtin", "spot_trainer.costs",
                                                   "spot_trainer.distributed")),
               *(line for leaf in LATEST_RECORD for line in offenders(leaf, ("spot_trainer",)))]
    assert [line for line in reached if not any(under(line.split()[-1], leaf) for leaf in LATEST_RECORD)] == []
    assert offenders("spot_trainer.costs", ("spot_trainer.agent", "spot_trainer.builtin", "spot_trainer.capacity",
                                       "spot_trainer.distributed")) == []


def test_the_job_commands_know_nothing_of_the_training_program_or_torch() -> None:
    # They run on the user's machine, where none of those need be installed.
    assert offenders("spot_trainer.ops", ("spot_trainer.builtin", "spot_trainer.distributed",
                                          "spot_trainer.storage.files.local", "torch", "numpy")) == []
    # Only the command line reaches them; the agent and the rest of the runtime never do.
    users = sorted(m for m, targets in MODULES.items()
                   if not under(m, "spot_trainer.ops") and any(under(t, "spot_trainer.ops") for t in targets))
    assert users == ["spot_trainer.__main__"]


def test_the_capacity_watch_stands_alone_as_the_lambda_it_is_inlined_into() -> None:
    allowed = {"__future__", "json", "os", "re", "time", "datetime", "typing", "boto3"}
    imported = {name.split(".")[0] for name in MODULES["spot_trainer.capacity.watch"]}
    assert imported <= allowed, imported - allowed


def test_the_product_never_imports_the_stand_ins_or_the_tests() -> None:
    for package in PRODUCT:
        assert offenders(package, ("localcloud", "tests")) == []
    assert not list((ROOT / "spot_trainer").rglob("fake_*.py")), "stand-ins live in localcloud/, not in the pip package"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the product's own modules, or None."""
    edges = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def absolute_self_imports(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if (isinstance(node, ast.ImportFrom) and node.level == 0
                and (node.module or "").split(".")[0] in ("spot_trainer", "spot_trainer"))
            or (isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("spot_trainer", "spot_trainer")
                                                     for a in node.names))]


def test_the_runtime_imports_itself_only_by_relative_name() -> None:
    # The folder is spot_trainer/, the wheel installs it as spot_trainer: an absolute import breaks one of them.
    assert [hit for path in (ROOT / "spot_trainer").rglob("*.py") for hit in absolute_self_imports(path)] == []


def test_the_wheel_lists_every_package_of_the_runtime() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(("spot_trainer", *p.parent.relative_to(ROOT / "spot_trainer").parts))
               for p in (ROOT / "spot_trainer").rglob("__init__.py")}
    assert folders == listed


def test_no_import_cycle_in_the_product() -> None:
    # A package's __init__ is not an edge target of its own submodules' imports (Python loads it first).
    graph = {m: {t for t in targets if not under(m, t)} for m, targets in MODULES.items()}
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph) or [])


# The local spot cloud and the benchmarks are no part of the wheel, but a reader meets them as folders of the same
# house: they too import one way. A benchmark's helpers are imported as top-level names where the benchmark puts its
# own folder on sys.path (`hostile.judging` is benchmarks/hostile/judging.py).
BESIDE_THE_PRODUCT = ("localcloud", "benchmarks")


def beside_the_product() -> dict[str, set[str]]:
    files = [p for folder in BESIDE_THE_PRODUCT for p in (ROOT / folder).rglob("*.py")]
    named = {module_name(p) for p in files}
    return {module_name(p): {f"benchmarks.{name}" if f"benchmarks.{name}" in named else name
                             for name in imports_of(p)} for p in files}


BESIDE = beside_the_product()


def test_the_rules_see_the_imports_beside_the_product() -> None:
    assert "localcloud.fleet" in BESIDE["localcloud.player"]
    assert "benchmarks.hostile.judging" in BESIDE["benchmarks.hostile_inputs"]
    assert "benchmarks.region_timing" in BESIDE["benchmarks.region_moves"]


@pytest.mark.parametrize("folder", BESIDE_THE_PRODUCT)
def test_no_import_cycle_beside_the_product(folder: str) -> None:
    graph = {m: {t for t in targets if not under(m, t)} for m, targets in BESIDE.items() if under(m, folder)}
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph) or [])


def test_the_local_cloud_s_run_options_know_nothing_of_the_player() -> None:
    # What a run plays is given to the player; whoever watches the run each tick is handed to it apart.
    assert not [t for t in BESIDE["localcloud.run_options"] if under(t, "localcloud.player")]


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("entry", ["spot_trainer.agent.cli", "spot_trainer.__main__"])
def test_starting_the_agent_does_not_load_torch(entry: str) -> None:
    agent_and_storage = sorted(m for m in MODULES
                               if (under(m, "spot_trainer.agent") or under(m, "spot_trainer.storage"))
                               and m != "spot_trainer.storage.files.local")
    installed = [entry, *agent_and_storage]
    code = f"import sys, importlib; [importlib.import_module(m) for m in {installed!r}]; " \
           "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"importing the agent loaded {result.stdout.strip()}"


def test_nothing_imports_the_runtime_by_its_old_name() -> None:
    # One module, one name in a process: `trainer.x` beside `spot_trainer.x` would be two copies of it
    # (two different exception classes, two registries), and the wheel has no `trainer` at all (user data v1's
    # runtime, spot-trainer 0.1, installs as `trainer`: it is its own package, never imported here).
    folders = ("spot_trainer", "stacks", "localcloud", "benchmarks", "tests", "jobs")
    outside = [ROOT / "app.py", *(p for folder in folders for p in (ROOT / folder).rglob("*.py"))]
    wrong = [f"{path.relative_to(ROOT)} imports {name}" for path in outside for name in imports_of(path)
             if name == "trainer" or name.startswith("trainer.")]
    assert wrong == []


# stacks/ in wings, each importing only the wings it names; at the top the stack that composes them, the job
# file's door and the commands run as `python -m stacks.<name>`, which no wing imports.
STACK_WINGS: dict[str, tuple[str, ...]] = {
    "stacks.job": (),
    "stacks.instance": ("stacks.job",),
    "stacks.console": ("stacks.job", "stacks.instance"),
    "stacks.resources": ("stacks.job", "stacks.instance", "stacks.console"),
    "stacks.synth": ("stacks.job",),
}
STACK_TOP = ("stacks.training_stack", "stacks.region_stacks", "stacks.job_file", "stacks.preflight",
             "stacks.console_template", "stacks.settings_reference", "stacks.help_text")


# Beside the shelf, the stack reads two rooms' leaves that import nothing of the runtime: the deadline's grammar, so
# synth refuses what the agent could not read, and the on-demand price table the synth summary prices a job with.
STACK_READS_OF_ROOMS = ("spot_trainer.capacity.policy", "spot_trainer.costs.on_demand_prices")


def test_the_stack_takes_from_the_runtime_only_the_shelf_and_two_leaves() -> None:
    allowed = (*SHELF, *STACK_READS_OF_ROOMS)
    reached = sorted(f"{module} imports {target}" for module, targets in MODULES.items()
                     if under(module, "stacks") or module == "app"
                     for target in targets if under(target, "spot_trainer") and target != "spot_trainer"
                     and not any(under(target, name) for name in allowed))
    assert reached == []
    assert [line for leaf in STACK_READS_OF_ROOMS for line in offenders(leaf, ("spot_trainer",))] == []


def test_the_rules_see_the_stacks_imports_of_the_runtime() -> None:
    assert "spot_trainer.settings" in MODULES["stacks.settings_reference"]
    assert not [t for targets in MODULES.values() for t in targets if under(t, "trainer")]


def test_each_wing_of_the_stack_says_what_it_owns_and_may_import() -> None:
    for wing in STACK_WINGS:
        init = ROOT / wing.replace(".", "/") / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc, f"{init.relative_to(ROOT)} must say what it owns and may import"


def test_every_module_of_the_stack_stands_in_a_wing_or_at_the_top() -> None:
    loose = sorted(m for m in MODULES if under(m, "stacks") and m != "stacks" and m not in STACK_TOP
                   and not any(under(m, wing) for wing in STACK_WINGS))
    assert loose == []


def test_no_wing_of_the_stack_imports_one_above_it_or_the_top() -> None:
    for wing, below in STACK_WINGS.items():
        above = tuple(w for w in STACK_WINGS if w != wing and w not in below) + STACK_TOP
        assert offenders(wing, above) == [], wing


LONG_FILE_LINES = 350  # past this a reader should be told why the file is one concept still
MOST_LINES_BESIDE_THE_PRODUCT = 400  # the local cloud and the benchmarks: past this, a file is split by concept


def test_a_long_file_of_the_product_says_at_its_top_why_it_is_long() -> None:
    unexplained = []
    for path in [p for package in (*PRODUCT, "localcloud") for p in (ROOT / package).rglob("*.py")]:
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > LONG_FILE_LINES and "long" not in doc.lower():
            unexplained.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert unexplained == []


@pytest.mark.parametrize("folder", BESIDE_THE_PRODUCT)
def test_no_file_of_the_local_cloud_or_the_benchmarks_is_past_the_most_lines(folder: str) -> None:
    lengths = {path.relative_to(ROOT): path.read_text().count("\n") for path in (ROOT / folder).rglob("*.py")}
    assert len(lengths) > 10
    assert {str(path): n for path, n in lengths.items() if n > MOST_LINES_BESIDE_THE_PRODUCT} == {}
