"""Run a function on a module right after it is imported, whoever imports it and however.

Python has no post-import hooks of its own. This finder sits first on `sys.meta_path`, steps aside
for every module but the ones it watches, asks the other finders for a watched module's spec and has
that spec's loader call the hook once the module has run. A watched module already imported gets its
hook at once. A hook that fails is one line on stderr: the user's import always goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.abc and .machinery would cost every process of the command milliseconds at start
    from importlib.machinery import ModuleSpec

Hook = Callable[[ModuleType], None]


def when_imported(hooks: dict[str, Hook]) -> None:
    """Call hooks[name](module) once module `name` has been imported (now, if it already was)."""
    pending = {name: hook for name, hook in hooks.items() if not _run_if_imported(name, hook)}
    if pending:
        sys.meta_path.insert(0, _PostImportFinder(pending))


def _run_if_imported(name: str, hook: Hook) -> bool:
    module = sys.modules.get(name)
    if module is None:
        return False
    _run(hook, module)
    return True


def _run(hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception as error:  # never the reason a user's import fails
        print(f"spot-trainer: could not prepare {module.__name__}: {error}", file=sys.stderr, flush=True)


class _PostImportFinder:  # a meta path finder is anything with find_spec
    def __init__(self, hooks: dict[str, Hook]) -> None:
        self.hooks = hooks

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        hook = self.hooks.get(fullname)  # not taken yet: a find_spec alone (an "is it installed?") loads nothing
        if hook is None:
            return None
        spec = self._others_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                execute(module)
            finally:
                del loader.exec_module  # the loader is the module's own; it reads as it was again
            if self.hooks.pop(fullname, None) is not None:  # once: a reload is the user's own business
                _run(hook, module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def _others_spec(self, fullname: str, path: Sequence[str] | None,
                     target: ModuleType | None) -> ModuleSpec | None:
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            if (spec := find_spec(fullname, path, target)) is not None:
                return spec  # type: ignore[no-any-return]
        return None
