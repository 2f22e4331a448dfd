"""Which SPOT_* names mean something on an instance, and a warning for one in the environment file that
none of them reads (a misspelt name would otherwise leave its setting at the default, silently).

A name unknown to this agent is only warned about, never refused: user data of a newer version may
write a setting that a pinned, older runtime does not know yet, and the job must still run.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

from ...settings import SETTINGS

# Read by user data, the runtime beside the agent, or the local spot cloud's stand-ins (not by config.py).
OTHER_SETTINGS = frozenset(s.env for s in SETTINGS if s.env and not s.attr)


def unread_setting_warnings(names: Iterable[str], agent_settings: Collection[str]) -> list[str]:
    """One line for each SPOT_* name that nothing reads, with the setting it most likely means."""
    known = sorted({*agent_settings, *OTHER_SETTINGS})
    warnings = []
    for name in names:
        if not name.startswith("SPOT_") or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"{name} is not a setting this agent reads{hint}; it is ignored")
    return warnings
