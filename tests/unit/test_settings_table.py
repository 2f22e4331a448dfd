"""Each setting is defined once, in the settings table: the job file's fields, the console's parameters,
the agent's SPOT_* names and the job-file reference all come from it."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from spot_trainer.agent.instance.config import ENV_NAMES, AgentConfig, ConfigError, config_from_env
from spot_trainer.settings import NO_DEFAULT, SETTINGS, ConsoleGroup, agent_env_names, env_setting, setting
from stacks.job.fields import SECTIONS, TOP_LEVEL
from stacks.settings_reference import PAGES, REFERENCE, render
from tests.unit.stack_support import synth

ROOT = Path(__file__).resolve().parents[2]
NOT_SETTINGS = {"SPOT_TRAINER_VALUE"}  # the delimiter of user data v1's here-documents
DERIVED_FIELDS = {"network.create"}  # set from network.subnets ("create"/"parameter"), never written
AGENT_ONLY_FIELDS = {"extra_env"}  # not a SPOT_* setting


def product_texts() -> dict[Path, str]:
    """Every file that names settings: the runtime, stacks, the local spot cloud, user data from v2."""
    files = [p for room in ("spot_trainer", "stacks", "localcloud") for p in (ROOT / room).rglob("*.py")]
    files += [p for p in (ROOT / "userdata").rglob("*.sh") if "v1" not in p.parts]  # v1 is frozen
    files += [*(ROOT / "localcloud" / "bin").iterdir(), ROOT / "app.py"]
    return {path: path.read_text() for path in files if path.is_file()}


def test_every_spot_name_the_product_uses_is_in_the_table() -> None:
    known = {s.env for s in SETTINGS if s.env}
    used = {name: path for path, text in product_texts().items()
            for name in re.findall(r"\bSPOT_[A-Z0-9_]*[A-Z0-9]\b", text)}
    unknown = {name: str(path.relative_to(ROOT)) for name, path in used.items()
               if name not in known | NOT_SETTINGS}
    assert unknown == {}, "add them to spot_trainer/settings.py"
    assert sorted(known - set(used)) == [], "settings nothing reads or writes"


def test_every_job_file_field_is_in_the_table_and_only_there() -> None:
    table = {s.field for s in SETTINGS if s.field}
    fields = {f"{section}.{f.name}" for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
    assert fields - DERIVED_FIELDS | (TOP_LEVEL - set(SECTIONS)) == table
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f"{section}.{f.name}" not in DERIVED_FIELDS:
                assert f.default == setting(f"{section}.{f.name}").default, f.name


TYPES_DECLARED = {"str": str, "int": int, "float": float, "bool": bool, "tuple[str, ...]": tuple}


def test_each_job_file_field_is_declared_with_the_type_of_its_default_in_the_table() -> None:
    """A job file's value is checked against the type of the table's default: a spec declaring another
    would let the type checker pass code that the value it really holds breaks."""
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f"{section}.{f.name}" not in DERIVED_FIELDS:
                declared = TYPES_DECLARED[str(f.type)]
                assert declared is type(setting(f"{section}.{f.name}").default), f"{section}.{f.name}: {f.type}"


def test_the_agent_reads_exactly_the_table_s_names_with_its_defaults() -> None:
    assert ENV_NAMES == agent_env_names()
    attrs = {f.name: f for f in dataclasses.fields(AgentConfig)}
    assert set(attrs) - AGENT_ONLY_FIELDS == {s.attr for s in SETTINGS if s.attr}
    for s in SETTINGS:
        if s.attr and s.agent_value is not NO_DEFAULT:
            assert attrs[s.attr].default == s.agent_value, s.env
    with pytest.raises(ConfigError, match="missing required setting SPOT_BUCKET"):
        config_from_env({"SPOT_JOB": "j", "SPOT_COMMAND": "builtin"})


@pytest.mark.parametrize("module", ["stacks/job/spec.py", "spot_trainer/agent/instance/config.py"])
def test_no_default_is_written_again_beside_the_table(module: str) -> None:
    """A literal default in a spec or the agent's configuration would be a second definition."""
    tree = ast.parse((ROOT / module).read_text())
    literals = [f"{node.target.id} = {ast.unparse(node.value)}" for cls in ast.walk(tree)
                if isinstance(cls, ast.ClassDef) and cls.name.endswith(("Spec", "Config")) and cls.name != "JobSpec"
                for node in cls.body if isinstance(node, ast.AnnAssign) and node.value is not None
                and isinstance(node.target, ast.Name) and node.target.id not in AGENT_ONLY_FIELDS | {"create"}
                and not (isinstance(node.value, ast.Attribute) and node.value.attr == "default")
                and not (isinstance(node.value, ast.Name) and node.value.id == "TABLE")
                and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "agent_default")]
    assert literals == []


def test_the_console_s_parameters_are_the_table_s(tmp_path: Path) -> None:
    """An own command with its network chosen at deploy time: every parameter the template can have."""
    job = tmp_path / "own.toml"
    job.write_text('[run]\ncommand = "python train.py"\n[network]\nsubnets = "parameter"\n')
    template = synth(str(job), tmp_path / "out").raw
    table = {p.name for s in SETTINGS for p in s.console}
    made_by_cdk = {name for name in template["Parameters"] if name.startswith("AssetParameters")}
    assert set(template["Parameters"]) - made_by_cdk - {"BootstrapVersion"} == table
    assert template["Parameters"]["KeepCheckpoints"]["ConstraintDescription"] == \
        setting("storage.keep_checkpoints").console[0].rule


def test_each_console_parameter_has_a_place_of_its_own_in_its_group() -> None:
    """The console's order is the table's groups and places: two parameters in one place would fall back
    on the table's order, which is the job file's; so each has its own, counted from 1."""
    for group in ConsoleGroup:
        places = sorted(p.place for s in SETTINGS for p in s.console if p.group == group)
        assert places == list(range(1, len(places) + 1)), group


def test_the_job_file_reference_is_made_from_the_table() -> None:
    for page in PAGES:
        text = page.read_text()
        assert render(text) == text, f"{page.name}: run python -m stacks.settings_reference"
    assert f"| `{env_setting('SPOT_GRACE_SECONDS').env}` |" in REFERENCE.read_text()


def test_the_knobs_only_tests_turn_are_out_of_the_users_reference() -> None:
    tuning = [s.env for s in SETTINGS if s.tuning]
    assert "SPOT_POLL_SECONDS" in tuning and "SPOT_FAKE_GPU_COUNT" in tuning
    reference, development = (page.read_text() for page in PAGES)
    assert [name for name in tuning if f"| `{name}` |" in reference] == []
    assert [name for name in tuning if f"| `{name}` |" not in development] == []
    assert all(s.env and not s.field for s in SETTINGS if s.tuning)  # a job file never sets one
