"""Checks of an environment's code when it is loaded (a plugin's entry point, a ``--env FILE.py``): each mistake the
engine would otherwise meet episode after episode as ``env_error`` is one line naming the file and line of the
definition and the fix.

- a method the engine awaits (``Session.begin``, ``step``, ``on_turn_limit``, ``on_context_limit``, ``close``;
  ``Environment.start``, ``close``, ``open_session``) defined with a plain ``def``, and a method it calls without
  awaiting (``tasks``, ``tools``, ``settled``) defined with ``async def``;
- a method the class must define and does not (``tasks``, ``open_session``; a session's ``begin``, ``step``);
- a return annotation that is not what the engine expects (``step(...) -> str``: a ``Step`` is expected).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import Environment, Outcome, Session, Step

_AWAITED: dict[type, tuple[str, ...]] = {
    Session: ("begin", "step", "on_turn_limit", "on_context_limit", "close"),
    Environment: ("start", "close", "open_session"),
}
_CALLED: dict[type, tuple[str, ...]] = {Session: ("tools", "settled"), Environment: ("tasks", "count", "get_task")}
_RETURNS: dict[tuple[type, str], tuple[type, str]] = {
    (Session, "begin"): (list, "a list of messages"),
    (Session, "step"): (Step, "a Step"),
    (Session, "on_turn_limit"): (Outcome, "an Outcome"),
    (Session, "on_context_limit"): (Outcome, "an Outcome"),
    (Environment, "open_session"): (Session, "a Session"),
}


def where(obj: Any) -> str:
    """``file:line`` of a class's or function's definition (``?`` when Python cannot tell)."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    try:
        file = inspect.getsourcefile(target) or inspect.getfile(target)
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        return str(getattr(module, "__file__", None) or "?")
    return f"{_short_path(file)}:{line}"


def _short_path(file: str) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    path = Path(file)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _own(cls: type, name: str) -> Any:
    """The function ``cls`` defines for ``name`` itself or through a base of its own (not the engine's), else None."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("agentbench_async.envs.base") or klass is object:
            return None
        if name in klass.__dict__:
            value = klass.__dict__[name]
            return value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
    return None


def check_class(cls: type) -> None:
    """One ConfigError line for the first mistake of an ``Environment`` or ``Session`` subclass (module docstring)."""
    base = Session if issubclass(cls, Session) else Environment
    kind = "session" if base is Session else "environment"
    missing = sorted(getattr(cls, "__abstractmethods__", ()) or ())
    if missing:
        defs = ", ".join(f"{'async ' if m in _AWAITED[base] else ''}def {m}(...)" for m in missing)
        raise ConfigError(f"{where(cls)}: {kind} class {cls.__name__} lacks {', '.join(missing)}: define {defs}")
    for name in _AWAITED[base]:
        fn = _own(cls, name)
        if fn is not None and callable(fn) and not inspect.iscoroutinefunction(fn):
            raise ConfigError(f"{where(fn)}: {cls.__name__}.{name} must be async (async def {name}(...)): the engine awaits it")
    for name in _CALLED[base]:
        fn = _own(cls, name)
        if fn is not None and (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)):
            raise ConfigError(f"{where(fn)}: {cls.__name__}.{name} must not be async (def {name}(...)): the engine calls it "
                              "without awaiting")  # fmt: skip
    if base is Environment:
        check_behaviour_checks(getattr(cls, "behaviour_checks", {}), where(cls))
    for (klass, name), (expected, words) in _RETURNS.items():
        fn = _own(cls, name) if klass is base else None
        if fn is None:
            continue
        hint = _return_hint(fn)
        if isinstance(hint, type) and hint is not type(None) and not issubclass(hint, expected):
            raise ConfigError(f"{where(fn)}: {cls.__name__}.{name} is declared to return {hint.__name__}; the engine expects "
                              f"{words}")  # fmt: skip


def check_behaviour_checks(checks: Any, at: str) -> None:
    """``behaviour_checks``: ``looping`` true/false, ``stalled`` a number of replies (0: off); else one ConfigError line."""
    if not isinstance(checks, Mapping) or set(checks) - {"looping", "stalled"}:
        raise ConfigError(f"{at}: behaviour_checks must be a mapping of looping (true/false) and stalled (replies, 0: off), "
                          f"got {checks!r}")  # fmt: skip
    looping, stalled = checks.get("looping", True), checks.get("stalled", 3)
    if not isinstance(looping, bool) or isinstance(stalled, bool) and stalled or not isinstance(stalled, int) or stalled < 0:
        raise ConfigError(f"{at}: behaviour_checks: looping is true or false, stalled a number of replies >= 0 (0 or false: off); "
                          f"got {dict(checks)!r}")  # fmt: skip


def _return_hint(fn: Any) -> Any:
    """``fn``'s return annotation resolved to an object (None when absent or not resolvable here)."""
    try:
        import typing

        return typing.get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an annotation naming what is not importable here: nothing to check
        return None


def check_module_classes(env: type[Environment], modules: Iterable[str]) -> None:
    """``env`` and every ``Session`` subclass defined in ``modules`` (names, or their prefixes ending in ``.``) checked."""
    prefixes = tuple(modules)
    check_class(env)
    seen: set[type] = set()
    stack = list(Session.__subclasses__())
    while stack:
        klass = stack.pop()
        if klass in seen:
            continue
        seen.add(klass)
        stack += klass.__subclasses__()
        module = klass.__module__
        if any(module == p or (p.endswith(".") and module.startswith(p)) for p in prefixes):
            check_class(klass)
