"""Environment registry: name -> implementation, imported lazily so an environment's heavy
dependencies (a SPARQL store, a database driver) load only when that environment is used.

Besides the built-in ones, any installed package may add environments by declaring entry points in the group
``agentbench_async.environments`` (``NAME = "module:EnvironmentClass"``). They are found the same way in every
process (the run, ``serve-mock``, ``--workers``/Ray workers), listed by ``agentbench envs`` and run when named
(``--env NAME``, or ``--env all,NAME``: ``all`` alone is the built-in ones). One that cannot be loaded is a one-line
error naming its package when it is used, and never hides the others; one named like a built-in is refused.

An environment may also come from one Python file (``--env ./guess_number.py``: ``files.py``); once loaded in a
process it is found by its name like the others, and ``make_env`` loads it from the path the run stored in its
options (``env_file``), so workers and the mock server play the same file.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EnvUnavailableError
from .base import CODE, ENV_FILE, ActionMode, Environment, EpisodeContext, Outcome, Session, Step, Task
from .checks import check_module_classes
from .files import load_env_file, loaded
from .names import _REGISTRY, ENV_NAMES, PLUGIN_GROUP, Plugin, plugins


def plugin_envs() -> list[str]:
    """The names of the plugin environments that may run (not refused), sorted; each is loaded only when used."""
    return [name for name, plugin in plugins().items() if plugin.refused is None]


@functools.cache
def _load_plugin(name: str) -> type[Environment]:
    plugin = plugins()[name]
    if plugin.refused:
        raise ConfigError(f"environment plugin {name!r} from {plugin.package} is refused: {plugin.refused}")
    module_name, _, attr = plugin.target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - any failure of someone else's code is one line, not a traceback
        detail = " ".join(str(exc).split()) or "no message"
        raise EnvUnavailableError(f"environment plugin {name!r} from {plugin.package} cannot be loaded ({plugin.target}): "
                                  f"{type(exc).__name__}: {detail}") from None  # fmt: skip
    if not (isinstance(obj, type) and issubclass(obj, Environment)):
        raise EnvUnavailableError(f"environment plugin {name!r} from {plugin.package}: {plugin.target} is not a subclass of "
                                  "agentbench_async.environment.Environment")  # fmt: skip
    if getattr(obj, "name", None) != name:
        raise EnvUnavailableError(f"environment plugin {name!r} from {plugin.package}: {plugin.target}.name is "
                                  f"{getattr(obj, 'name', None)!r}; it must be the entry point's name {name!r}")  # fmt: skip
    top = module_name.partition(".")[0]
    try:  # a sync method the engine awaits, a missing one, a wrong return type: one line with file and line, now
        check_module_classes(obj, [top, top + "."])
    except ConfigError as exc:
        raise EnvUnavailableError(f"environment plugin {name!r} from {plugin.package}: {exc}") from None
    return obj


def _installed(name: str) -> bool:
    return importlib.util.find_spec(_REGISTRY[name].partition(":")[0]) is not None


def available_envs(include_hidden: bool = False) -> list[str]:
    """Implemented environment names in contract order (hidden self-test ones last, if asked)."""
    names = [n for n in ENV_NAMES if n in _REGISTRY and _installed(n)]
    if include_hidden:
        names += [n for n in _REGISTRY if n not in ENV_NAMES]
    return names


def env_class(name: str) -> type[Environment]:
    """The class of environment ``name`` (built-in, plugin or a file loaded in this process); a ConfigError/EnvUnavailableError
    in one line if none."""
    file_env = loaded(name)
    if file_env is not None:
        return file_env.cls
    if name not in _REGISTRY and name in plugins():
        return _load_plugin(name)
    if name not in _REGISTRY or not _installed(name):
        known = ", ".join(available_envs() + plugin_envs())
        if name in ENV_NAMES:
            raise ConfigError(f"environment {name!r} is not implemented yet; available: {known}")
        raise ConfigError(f"unknown environment {name!r}; available: {known}")
    module_name, _, cls_name = _REGISTRY[name].partition(":")
    module = importlib.import_module(module_name)
    cls: type[Environment] = getattr(module, cls_name)
    return cls


def make_env(name: str, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> Environment:
    """Environment ``name`` made with these options; a file environment is loaded from the path they hold (``env_file``)
    first, and refused if its ``code`` differs from the file's now."""
    if options and options.get(ENV_FILE):
        load_env_file(str(options[ENV_FILE]), expect_code=options.get(CODE))
    return env_class(name)(data_dir=data_dir, options=options)


__all__ = [
    "ENV_NAMES",
    "PLUGIN_GROUP",
    "ActionMode",
    "Environment",
    "EpisodeContext",
    "Outcome",
    "Plugin",
    "Session",
    "Step",
    "Task",
    "available_envs",
    "env_class",
    "make_env",
    "plugin_envs",
    "plugins",
]
