"""Which SPOT_* names mean something on an instance, and a warning for one in the environment file that
none of them reads (a misspelt name would otherwise leave its setting at the default, silently).

A name unknown to this agent is only warned about, never refused: user data of a newer version may
write a setting that a pinned, older runtime does not know yet, and the job must still run.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

# Read by user data, the runtime beside the agent, or the local spot cloud's stand-ins (not by config.py).
OTHER_SETTINGS = frozenset({
    "SPOT_ROOT", "SPOT_CODE_URI", "SPOT_SETUP_COMMAND", "SPOT_TRAINER_PACKAGE", "SPOT_BASE_PYTHON",
    "SPOT_USERDATA_VERSION", "SPOT_TORCH_SPEC", "SPOT_WAIT", "SPOT_STACK", "SPOT_LAUNCHED_AT",
    "SPOT_RETRY_MAX_MS", "SPOT_RETRY_BASE_MS", "SPOT_RETRY_ATTEMPTS", "SPOT_RESTART_SEC",
    "SPOT_PYTHON_CANDIDATES", "SPOT_PRICE_TRACE", "SPOT_PIP_ARGS", "SPOT_CURL_MAX_TIME",
    "SPOT_CURL_CONNECT_TIMEOUT", "SPOT_COLLECTIVE_TIMEOUT", "SPOT_AWS_CLI", "SPOT_DATA_CACHE",
    "SPOT_MAX_SPOT_WAIT",  # the capacity watch's setting, in the header for the record
    "SPOT_FAKE_GPU_COUNT", "SPOT_FAKE_GPU_NAME", "SPOT_FAKE_GPU_MEMORY_MIB",  # the local nvidia-smi stand-in
    "SPOT_AUTO_RESUME",  # read in the command's own processes (integrations/auto_resume.py)
})


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
