"""Change what a framework class is built with: the arguments of every later `cls(...)`, before its
own `__init__` sees them (a default the agent knows better, a callback, the round's node count)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inspect costs every process of the command milliseconds at start
    from inspect import BoundArguments


def before_init(cls: type, adjust: Callable[[BoundArguments], None]) -> None:
    """`adjust` gets each call's arguments, bound to `__init__`'s signature (`self` included)."""
    import inspect  # here, not at start-up: only a process that imports the framework pays for it

    initialise: Callable[..., None] = getattr(cls, "__init__")  # noqa: B009  (mypy: __init__ of an instance)
    signature = inspect.signature(initialise)

    @functools.wraps(initialise)
    def adjusted(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        adjust(bound)
        initialise(*bound.args, **bound.kwargs)

    cls.__init__ = adjusted  # type: ignore[misc]
