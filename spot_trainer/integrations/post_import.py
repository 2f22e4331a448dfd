"""Run a function on a module right after it is imported, whoever imports it and however.

Python has no post-import hooks of its own. One finder sits first on `sys.meta_path`, steps aside
for every module but the ones it watches, asks the other finders for a watched module's spec and
hands out that spec with a loader of its own, which runs the real loader and then the hook. The real
loader is never changed (several modules may share one, as zip importers do) and is the module's
loader again once it runs. A watched module already imported gets its hook at once. A hook that fails
is one line on stderr: the user's import always goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importlib.abc and .machinery would cost every process of the command milliseconds at start
    from importlib.machinery import ModuleSpec

Hook = Callable[[ModuleType], None]


def when_imported(hooks: dict[str, Hook]) -> None:
    """Call hooks[name](module) once module `name` has been imported (now, if it already was).
    Names some earlier call already watches keep their first hook: installing twice changes nothing."""
    finder = next((found for found in sys.meta_path if isinstance(found, _PostImportFinder)), None)
    if finder is None:
        finder = _PostImportFinder()
        sys.meta_path.insert(0, finder)
    for name, hook in hooks.items():
        if name in finder.hooks or name in finder.done:
            continue
        if (module := sys.modules.get(name)) is not None:
            finder.done.add(name)
            _run(hook, module)
        else:
            finder.hooks[name] = hook


def _run(hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception as error:  # never the reason a user's import fails
        print(f"spot-trainer: could not prepare {module.__name__}: {error}", file=sys.stderr, flush=True)


class _PostImportFinder:  # a meta path finder is anything with find_spec
    def __init__(self) -> None:
        self.hooks: dict[str, Hook] = {}
        self.done: set[str] = set()
        self._looking: set[str] = set()  # names this finder is asking the others about right now

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        # A find_spec alone (an "is it installed?") loads nothing: the hook stays until the module runs.
        if fullname not in self.hooks or fullname in self._looking:
            return None
        self._looking.add(fullname)
        try:
            spec = self._others_spec(fullname, path, target)
        finally:
            self._looking.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # A Loader in all but its base class (importlib.abc costs every process milliseconds at start).
        spec.loader = _HookedLoader(spec.loader, lambda module: self._ran(fullname, module))  # type: ignore[assignment]
        return spec

    def _ran(self, fullname: str, module: ModuleType) -> None:
        if (hook := self.hooks.pop(fullname, None)) is not None:  # once: a reload is the user's own business
            self.done.add(fullname)
            _run(hook, module)

    def _others_spec(self, fullname: str, path: Sequence[str] | None,
                     target: ModuleType | None) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            if (spec := find_spec(fullname, path, target)) is not None:
                return spec  # type: ignore[no-any-return]
        return None


class _HookedLoader:
    """The real loader for one module, then the hook; everything else is asked of the real loader."""

    def __init__(self, loader: Any, ran: Hook) -> None:
        self._loader, self._ran = loader, ran

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        # From here on the module names its real loader (reload, inspect and importlib.resources ask it).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._ran(module)
