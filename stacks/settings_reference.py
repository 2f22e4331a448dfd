"""The settings' reference tables, made from the settings table: the job file's sections and what the
instance sets (docs/job-file.md), and the knobs only tests and the local spot cloud turn
(docs/development.md).

Each table stands between `<!-- settings: SECTION -->` and `<!-- /settings -->`; the prose around
them is written by hand. `python -m stacks.settings_reference` rewrites the tables in place;
tests/unit/test_settings_table.py fails while a page differs from what this makes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from spot_trainer.settings import NO_DEFAULT, SETTINGS, Setting

DOCS = Path(__file__).resolve().parent.parent / "docs"
REFERENCE = DOCS / "job-file.md"
PAGES = (REFERENCE, DOCS / "development.md")
_TABLE = re.compile(r"(<!-- settings: (?P<section>[a-z]*) -->\n).*?(<!-- /settings -->)", re.DOTALL)
INSTANCE = "instance"  # the table of SPOT_* names no job-file field sets
TUNING = "tuning"  # the table of SPOT_* names only tests and the local spot cloud set
TOP_LEVEL = "top"  # the fields outside any [section]


def literal(value: Any) -> str:
    """A default as the job file spells it."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{item}"' for item in value) + "]`"
    return f"`{value}`"


def _default(setting: Setting) -> str:
    return setting.default_text or literal(setting.default)


def _cell(text: str) -> str:
    return f"`{text}`" if text else "–"


def _field_row(setting: Setting) -> str:
    parameters = ", ".join(f"`{p.name}`" for p in setting.console) or "–"
    return f"| `{setting.key}` | {_default(setting)} | {parameters} | {_cell(setting.env)} | {setting.help} |"


def _instance_row(setting: Setting) -> str:
    value = setting.agent_value
    default = "required" if value is NO_DEFAULT else literal(value) if setting.attr and value != "" else "–"
    parameters = ", ".join(f"`{p.name}`" for p in setting.console) or "–"
    return f"| `{setting.env}` | {default} | {parameters} | {setting.help} |"


def table(section: str) -> str:
    """The markdown table of one job-file section, of TOP_LEVEL, of INSTANCE or of TUNING."""
    if section in (INSTANCE, TUNING):
        rows = [_instance_row(s) for s in SETTINGS if not s.field and s.env and s.tuning == (section == TUNING)]
        header = ["| name | the agent's default | parameter | what it sets |", "| --- | --- | --- | --- |"]
        return "\n".join([*header, *rows])
    wanted = "" if section == TOP_LEVEL else section
    rows = [_field_row(s) for s in SETTINGS if s.field and s.section == wanted]
    return "\n".join(["| field | default | parameter | `SPOT_*` | what it sets |",
                      "| --- | --- | --- | --- | --- |", *rows])


def render(text: str) -> str:
    """`text` with every marked table made again."""
    return _TABLE.sub(lambda m: f"{m.group(1)}{table(m.group('section'))}\n{m.group(3)}", text)


def main() -> int:
    for page in PAGES:
        text = page.read_text()
        page.write_text(render(text))
        print(f"{page}: {len(_TABLE.findall(text))} tables made from the settings table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
