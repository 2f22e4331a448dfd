"""Render a versioned bootstrap script from userdata/<version>/ with a header of exported variables.

The header goes right after the shebang. Plain values are shell-quoted at synth time; values that are
CloudFormation tokens (parameters, generated names) are only known at deploy time. From v2 they are
emitted base64-encoded by CloudFormation itself (Fn::Base64) and decoded at boot, so no text a console
user types, newlines and here-document delimiters included, can end the value and run as root.
v1 keeps its quoted here-document form, byte for byte, for the stacks deployed with it.

From v2 the script is assembled from shared parts (userdata/lib/<part>.sh, in the order the version table
stacks/instance/userdata_versions.py gives) followed by the version's own bootstrap.sh, which has the shebang and
calls them: one self-contained script on the instance. Before the parts go the settings table's values
they fall back on (`table_values`), so no script restates a default or an allowance.

From v2 the script body (less its full-line comments and blank lines) travels gzip-compressed and
base64-encoded on one line after the header, and is decoded and run at boot. `cdk deploy` without a
bootstrapped account takes a template of at most 50 KiB as YAML, where every line of a multi-line
string is indented by its depth: the plain script alone would cost 19 KB of that, compressed 6 KB.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Fn, Token

from spot_trainer.settings import STOP_TIMEOUT_ALLOWANCE_SECONDS, env_setting
from stacks.instance.userdata_versions import userdata_version
from stacks.job.spec import CURRENT_USERDATA_VERSION

USERDATA_ROOT = Path(__file__).resolve().parents[2] / "userdata"
BOOTSTRAP_NAME = "bootstrap.sh"
SHARED_PARTS = "lib"  # userdata/lib/: not a version (it has no bootstrap.sh)
MAX_USER_DATA_BYTES = 16 * 1024
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_TOKEN_TEXT = re.compile(r"\$\{Token\[[^\]]*\]\}")
_HEREDOC_END = "SPOT_TRAINER_VALUE"
_HEREDOC_START = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")  # not <<< (a here-string)


class UserDataError(ValueError):
    """The requested version or a header variable is unusable; the message names it."""


def available_versions() -> list[str]:
    return sorted(p.name for p in USERDATA_ROOT.iterdir() if (p / BOOTSTRAP_NAME).is_file())


def script_path(version: str) -> Path:
    path = USERDATA_ROOT / version / BOOTSTRAP_NAME
    if not path.is_file():
        raise UserDataError(
            f"user data version {version!r} not found; available: {', '.join(available_versions())}"
        )
    return path


def part_paths(version: str) -> list[Path]:
    """The shared parts `version` is assembled from, in render order (none for a one-file version)."""
    return [USERDATA_ROOT / SHARED_PARTS / f"{part}.sh" for part in userdata_version(version).parts]


def table_values() -> dict[str, str]:
    """What the shared parts fall back on where the header leaves a setting out (a test's partial header,
    the checkpoint folder a job does not set), and the stop timeout's allowance past the grace period:
    each from the settings table (spot_trainer/settings.py)."""
    return {
        "DEFAULT_SPOT_GRACE_SECONDS": str(env_setting("SPOT_GRACE_SECONDS").default),
        "DEFAULT_SPOT_WORKDIR": env_setting("SPOT_WORKDIR").default,
        "DEFAULT_SPOT_CHECKPOINT_DIR": env_setting("SPOT_CHECKPOINT_DIR").agent_value,  # the agent's own folder
        "STOP_TIMEOUT_ALLOWANCE_SECONDS": str(STOP_TIMEOUT_ALLOWANCE_SECONDS),
    }


def table_values_part() -> str:
    lines = "".join(f"{name}={shlex.quote(value)}\n" for name, value in table_values().items())
    return f"# The settings table's values (spot_trainer/settings.py), written by stacks/instance/user_data.py\n{lines}"


def script_body(version: str) -> str:
    """What follows the shebang and the header once rendered, before any compression: the shared parts
    after the table's values they read, then the version's own script after its shebang; from v2 without
    comments and blank lines."""
    shebang, _, own = script_path(version).read_text().partition("\n")
    if not shebang.startswith("#!"):
        raise UserDataError(f"{script_path(version)} must start with a shebang line")
    parts = part_paths(version)
    body = (table_values_part() if parts else "") + "".join(path.read_text() for path in parts) + own
    return body if userdata_version(version).heredoc_header else without_comments(body)


def export_line(name: str, value: str, version: str = CURRENT_USERDATA_VERSION) -> str:
    if not _NAME.match(name):
        raise UserDataError(f"header variable {name!r} must be UPPER_SNAKE_CASE")
    if not Token.is_unresolved(value):
        return f"export {name}={shlex.quote(value)}"
    if userdata_version(version).heredoc_header:
        return f"{name}=$(cat <<'{_HEREDOC_END}'\n{value}\n{_HEREDOC_END}\n)\nexport {name}"
    # The base64 alphabet cannot leave single quotes; printf adds nothing, base64 -d restores every byte.
    return f"{name}=$(printf %s '{Fn.base64(value)}' | base64 -d)\nexport {name}"


def without_comments(body: str) -> str:
    """`body` less its full-line comments and blank lines; here-documents are kept whole."""
    kept: list[str] = []
    terminator: str | None = None
    for line in body.splitlines(keepends=True):
        if terminator is not None:
            kept.append(line)
            terminator = None if line.rstrip("\n").lstrip("\t") == terminator else terminator
        elif line.strip() and not line.lstrip().startswith("#"):
            kept.append(line)
            start = _HEREDOC_START.search(line.replace("<<<", "   "))
            terminator = start.group(2) if start else None
    return "".join(kept)


def compressed(body: str) -> str:
    """`body` as one line that decodes and runs it in this shell (the header's variables stay set).
    mtime=0: the same script gives the same template."""
    packed = base64.b64encode(gzip.compress(body.encode(), compresslevel=9, mtime=0)).decode()
    return (f"# userdata/<version>/bootstrap.sh less comments, gzip+base64 (stacks/instance/user_data.py)\n"
            f"BOOTSTRAP_SCRIPT=\"$(printf %s '{packed}' | base64 -d | gzip -dc)\" || exit 70\n"
            'eval "$BOOTSTRAP_SCRIPT"\n')


def render_user_data(version: str, variables: Mapping[str, str]) -> str:
    """The script of `version` with `variables` exported right after its shebang line."""
    shebang = script_path(version).read_text().partition("\n")[0]
    body = script_body(version)
    if userdata_version(version).compressed_body:
        body = compressed(body)
    header = "\n".join(export_line(k, v, version) for k, v in variables.items())
    return f"{shebang}\n# --- rendered by Spot Trainer at synth time ---\n{header}\n# --- end of header ---\n{body}"


def deployed_size(version: str, header: Mapping[str, str], typed: Mapping[str, str]) -> int:
    """Bytes of the user data once deployed with `typed` (the job file's values) in place of the
    parameters that carry them: each arrives base64-encoded, 4/3 of its length, in a printf wrapper."""
    preview = {**header, **{name: "" for name in typed}}
    wrapper = len(export_line("X", Fn.ref("P"), version)) - len(str(Fn.ref("P")))
    # A deploy-time name's placeholder is as long as its number in this process (`${Token[TOKEN.987]}`):
    # counted as nothing, so the budget is the same whatever was synthesized before.
    rendered = _TOKEN_TEXT.sub("", render_user_data(version, preview))
    return len(rendered.encode()) + sum(
        4 * ((len(value.encode()) + 2) // 3) + wrapper for value in typed.values())
