"""What an unknown job-file key most likely means: the section it belongs in, or the key it misspells.

A key that exists in another section (`budget_usd` under `[capacity]`) names that section; a near miss
(`comand`) names the key it is close to, as difflib judges it; the known keys follow either way.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

CLOSE = 0.75  # difflib's ratio: `comand`/`command` and `emails`/`email` pass, `colour`/`command` does not


def unknown_key_message(section: str, key: str, known: Collection[str],
                        elsewhere: Mapping[str, Collection[str]]) -> str:
    """`section` "" for the top level; `elsewhere`: every other place (section "" = top) and its keys."""
    where = f"in [{section}]" if section else "at the top level"
    homes = [place for place, keys in elsewhere.items() if key in keys and place != section]
    listed = f"(known: {', '.join(known)})"
    if homes:
        home = homes[0]
        spelled = f"[{home}] {key} = …" if home else f"{key} = … above the first [section]"
        return f"unknown key {where}: it belongs in {f'[{home}]' if home else 'the top level'} ({spelled})"
    if close := difflib.get_close_matches(key, list(known), n=1, cutoff=CLOSE):
        return f"unknown key: did you mean {close[0]}? {listed}"
    return f"unknown key {listed}"
