"""A record's body as the JSON object every record of a job is: what the runtime did not write (empty, HTML,
a list) is a ValueError that says what was found. Standard library only."""

from __future__ import annotations

import json
from typing import Any


def json_object(body: bytes) -> dict[str, Any]:
    try:
        record = json.loads(body)
    except ValueError as error:
        raise ValueError(f"not valid JSON ({error})") from error
    if not isinstance(record, dict):  # every record we write is an object: this one was not ours
        raise ValueError(f"expected a JSON object, found {type(record).__name__}")
    return record
