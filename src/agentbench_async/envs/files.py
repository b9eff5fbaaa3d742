"""Environments from one Python file: ``agentbench run --env ./guess_number.py`` (and ``demo``, ``serve-mock --env``,
``--workers``/Ray), no package, no entry point.

The file holds either an ``Environment`` subclass (the full API: ``agentbench_async.environment``), or the short
functional form, module-level names the engine reads::

    NAME = "guess_number"          # optional: the file's name (lowercase, digits, _)
    MAX_TURNS = 7                  # optional (10): the most replies an episode gets
    METRIC = "success rate"        # optional: what the score means, as reports show it
    TASKS = [{"id": "a", "prompt": "...", ...}]   # or def tasks(split): -> an iterable of such dicts
    def prompt(task): -> str       # optional: the first message (default: task["prompt"])
    def step(task, state, reply): -> str | None | Step
        # the text shown to the model next; None: the episode is over (then score() grades it); a Step for full
        # control (an invalid reply, an Outcome of your own). ``state`` is a dict kept for the episode.
    def score(task, state): -> float | bool   # at the end and at the turn cap; success is a score of 1
    def oracle(task, messages): -> str        # optional mock players (demo, serve-mock, tests): oracle and weak
    def weak(task, messages): -> str
    BEHAVIOUR_CHECKS = {"stalled": 0}         # optional: the report's heuristics tuned (Environment.behaviour_checks)

Functions may be ``def`` or ``async def`` (a plain one runs on the event loop: it must not block). Mistakes are
found when the file is loaded, one line with file and line: a missing function, one that takes the wrong
arguments, an annotation returning the wrong type; the class form is checked as plugins are (``checks.py``).

The run stores the file's absolute path (option ``env_file``) and its sha256 (option ``code``) with the
environment's options: a worker process loads the same file and refuses one that changed since the run started,
and an edited file is a different configuration (a resume plays it again; ``demo`` says so).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EnvError, TaskFileError
from ..types import Message, ModelReply
from .base import CODE, ENV_FILE, Environment, EpisodeContext, Outcome, PolicyReply, Session, Step, Task
from .checks import check_behaviour_checks, check_module_classes, where
from .names import _REGISTRY, ENV_NAMES, plugins

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_MAX_BYTES = 4 << 20  # a file environment's source is read whole: at most 4 MiB


@dataclass(frozen=True)
class FileEnv:
    path: Path
    sha256: str
    cls: type[Environment]

    @property
    def code(self) -> str:
        return f"sha256:{self.sha256[:16]}"


_LOADED: dict[str, FileEnv] = {}  # name -> the file it was loaded from (this process)


def is_env_file(text: str) -> bool:
    """Whether an ``--env`` entry names a Python file rather than a registered environment."""
    return text.strip().endswith(".py")


def loaded(name: str) -> FileEnv | None:
    return _LOADED.get(name)


def load_env_file(text: str | Path, *, expect_code: str | None = None) -> FileEnv:
    """The environment of the Python file ``text``, loaded and checked once per process (a ConfigError line naming
    file and line for any mistake); ``expect_code``: the ``code`` the run recorded (a worker refuses an edited file)."""
    path = Path(text).expanduser()
    try:
        path = path.resolve()
        if path.stat().st_size > _MAX_BYTES:
            raise ConfigError(f"--env {text}: larger than {_MAX_BYTES >> 20} MiB; an environment file is Python source")
        source = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--env {text}: cannot read ({exc.strerror or exc}); give the path of a Python file") from None
    digest = hashlib.sha256(source).hexdigest()
    for known in _LOADED.values():
        if known.path == path and known.sha256 == digest:
            return _checked_code(known, expect_code)
    module_name = f"agentbench_env_file_{re.sub(r'[^0-9a-zA-Z_]', '_', path.stem)}_{digest[:12]}"
    module = _exec(path, module_name, text)
    cls = _environment_of(module, path, module_name)
    name = cls.name
    if name in _REGISTRY or name in ENV_NAMES or name == "all" or name in plugins():
        raise ConfigError(f"{where(cls) if cls.__module__ == module_name and not getattr(module, '_functional', False) else path}: "
                          f"environment name {name!r} is taken by {'an installed plugin' if name in plugins() else 'a built-in environment'}; "
                          "set NAME (or the class's name) to another")  # fmt: skip
    previous = _LOADED.get(name)
    if previous is not None and previous.path != path:
        raise ConfigError(f"--env {text}: environment name {name!r} is already loaded from {previous.path}; give one of them another NAME")
    loaded_env = FileEnv(path, digest, cls)  # an edited file loaded again is a new class: the mock asks its policies anew
    _LOADED[name] = loaded_env
    return _checked_code(loaded_env, expect_code)


def _checked_code(env: FileEnv, expect_code: str | None) -> FileEnv:
    if expect_code is not None and expect_code != env.code:
        raise ConfigError(f"{env.path} changed since the run started ({expect_code} then, {env.code} now); run the command again "
                          "to play the edited environment")  # fmt: skip
    return env


def _exec(path: Path, module_name: str, text: str | Path) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"--env {text}: not a Python file Python can load")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # classes defined there pickle by reference (workers load the same file)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(f"{path}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: one line with its file and line
        sys.modules.pop(module_name, None)
        raise ConfigError(f"{_failing_line(exc, path)}: {type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}") from None
    return module


def _failing_line(exc: BaseException, path: Path) -> str:
    """``file:line`` of the innermost frame of ``exc`` in ``path`` (else the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if Path(f.filename) == path] or frames
    return f"{mine[-1].filename}:{mine[-1].lineno}" if mine else str(path)


def _environment_of(module: Any, path: Path, module_name: str) -> type[Environment]:
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, Environment) and v.__module__ == module_name]  # fmt: skip
    if len(classes) > 1:
        raise ConfigError(f"{path}: defines {len(classes)} environments ({', '.join(c.__name__ for c in classes)}); keep one a file")
    if classes:
        cls = classes[0]
        if not isinstance(getattr(cls, "name", None), str) or not _NAME.fullmatch(cls.name):
            raise ConfigError(f"{where(cls)}: {cls.__name__}.name must be set to a lowercase name (letters, digits, _), "
                              f"got {getattr(cls, 'name', None)!r}")  # fmt: skip
        check_module_classes(cls, [module_name])
        if _own_policies(cls) is None:
            cls.policies = classmethod(lambda c: _module_policies(module))  # type: ignore[method-assign,assignment]
        return cls
    return _functional(module, path)


def _own_policies(cls: type[Environment]) -> Any:
    for klass in cls.__mro__:
        if klass is Environment:
            return None
        if "policies" in klass.__dict__:
            return klass.__dict__["policies"]
    return None


def _module_policies(module: Any) -> dict[str, Any]:
    """A file's mock players: its ``POLICIES`` mapping, else its ``oracle``/``weak``/``judge`` functions."""
    given = getattr(module, "POLICIES", None)
    if isinstance(given, Mapping):
        return dict(given)
    return {name: _text_policy(fn) for name in ("oracle", "weak", "judge") if callable(fn := getattr(module, name, None))}


def _text_policy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A ``Policy`` from ``fn(task, messages) -> str`` (task: the task's dict)."""
    def policy(request: Any) -> Any:
        reply = fn(request.task.data, request.messages)
        return reply if isinstance(reply, PolicyReply) else PolicyReply(content=str(reply))

    return policy


# -- the functional form ----------------------------------------------------------------------------------------------
def _functional(module: Any, path: Path) -> type[Environment]:
    """An ``Environment`` class made of a module's functional form (module docstring)."""
    module._functional = True
    name = getattr(module, "NAME", None)
    if name is None:
        name = re.sub(r"[^a-z0-9_]", "_", path.stem.lower())
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{path}: NAME {name!r} is not an environment name; set NAME to lowercase letters, digits and _ "
                          "(starting with a letter)")  # fmt: skip
    tasks_fn, task_list = getattr(module, "tasks", None), getattr(module, "TASKS", None)
    if tasks_fn is None and task_list is None:
        raise ConfigError(f"{path}: no tasks; define TASKS = [{{...}}, ...] or def tasks(split): returning the task dicts "
                          "(and def step(task, state, reply), def score(task, state)), or an Environment subclass")  # fmt: skip
    if tasks_fn is not None:
        _check_function(tasks_fn, "tasks", ("split",), path)
    elif not isinstance(task_list, (list, tuple)):
        raise ConfigError(f"{path}: TASKS must be a list of task dicts, got {type(task_list).__name__}")
    step_fn = getattr(module, "step", None)
    score_fn = getattr(module, "score", None)
    for fn, fname, params in ((step_fn, "step", ("task", "state", "reply")), (score_fn, "score", ("task", "state"))):
        if fn is None:
            raise ConfigError(f"{path}: no {fname}(); define def {fname}({', '.join(params)}): (see `agentbench_async.envs.files`)")
        _check_function(fn, fname, params, path)
    _check_returns(step_fn, "step", (str, Step, type(None)), "the next message (str), None (the episode is over) or a Step")
    _check_returns(score_fn, "score", (float, int, bool), "a number (float, or bool)")
    prompt_fn = getattr(module, "prompt", None)
    if prompt_fn is not None:
        _check_function(prompt_fn, "prompt", ("task",), path)
        _check_returns(prompt_fn, "prompt", (str, list), "the first message (str) or a list of messages")
    for player in ("oracle", "weak", "judge"):
        if getattr(module, player, None) is not None:
            _check_function(getattr(module, player), player, ("task", "messages"), path)
    max_turns = getattr(module, "MAX_TURNS", 10)
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ConfigError(f"{path}: MAX_TURNS must be a positive integer, got {max_turns!r}")
    metric = getattr(module, "METRIC", "success rate")
    if not isinstance(metric, str) or not metric.strip():
        raise ConfigError(f"{path}: METRIC must be a short text (what a score means, e.g. 'success rate'), got {metric!r}")
    checks = getattr(module, "BEHAVIOUR_CHECKS", {})
    check_behaviour_checks(checks, f"{path}: BEHAVIOUR_CHECKS")
    doc = (module.__doc__ or "").strip().splitlines()
    source = str(path)

    class FunctionSession(Session):
        def __init__(self, task: Task) -> None:
            self.task = task
            self.state: dict[str, Any] = {}

        async def begin(self) -> list[Message]:
            if prompt_fn is None:
                if "prompt" not in self.task.data:
                    raise EnvError(f"{source}: task {self.task.task_id!r} has no 'prompt' and the file defines no prompt(task)")
                first: Any = self.task.data["prompt"]
            else:
                first = await _called(prompt_fn, self.task.data)
            if isinstance(first, str):
                return [{"role": "user", "content": first}]
            if isinstance(first, list) and all(isinstance(m, dict) for m in first):
                return list(first)
            raise EnvError(f"{where(prompt_fn) if prompt_fn else source}: the first message is {type(first).__name__}; give text")

        async def step(self, reply: ModelReply) -> Step:
            text = reply.content or ""
            result = await _called(step_fn, self.task.data, self.state, text)
            action = " ".join(text.split())[:200] or None
            if isinstance(result, Step):
                return result if result.action is not None or result.outcome is not None else Step(**{**result.__dict__, "action": action})
            if result is None:
                return Step(action=action, outcome=await self._scored("completed"))
            if isinstance(result, str):
                return Step(observation=[{"role": "user", "content": result}], action=action)
            raise EnvError(f"{where(step_fn)}: step returned {type(result).__name__}; return the next message (str), None when "
                           "the episode is over, or a Step")  # fmt: skip

        async def on_turn_limit(self) -> Outcome:
            outcome = await self._scored("task_limit_exceeded")
            return Outcome(outcome.status, outcome.score, outcome.success, error="turn limit reached", details=outcome.details)

        async def _scored(self, status: str) -> Outcome:
            value = await _called(score_fn, self.task.data, self.state)
            if isinstance(value, bool) or (isinstance(value, (int, float)) and value == value):
                score = float(value)
                return Outcome(status=status, score=score, success=score >= 1.0)
            raise EnvError(f"{where(score_fn)}: score returned {value!r}; return a number (1 = solved) or a bool")

    class FunctionEnvironment(Environment):
        description = doc[0] if doc else f"an environment from {path.name}"
        requires = f"nothing (one file: {path})"

        def tasks(self, split: str) -> Iterator[Task]:
            items = tasks_fn(split) if tasks_fn is not None else task_list
            if inspect.isawaitable(items):
                raise TaskFileError(f"{where(tasks_fn)}: tasks() must be a plain def (it is called, not awaited)")
            for index, item in enumerate(items or ()):
                if isinstance(item, Task):
                    yield item
                    continue
                if not isinstance(item, dict):
                    at = where(tasks_fn) if tasks_fn is not None else source
                    raise TaskFileError(f"{at}: task {index} is {type(item).__name__}; each task is a dict (its 'id' optional)")
                yield Task(env=name, split=split, task_id=str(item.get("id", index)), data=item)

        async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
            return FunctionSession(task)

        @classmethod
        def policies(cls) -> Mapping[str, Any]:
            return _module_policies(module)

    FunctionEnvironment.name = name
    FunctionEnvironment.max_turns = max_turns
    FunctionEnvironment.metric = metric.strip()
    FunctionEnvironment.behaviour_checks = dict(checks)
    FunctionEnvironment.__qualname__ = FunctionEnvironment.__name__ = f"FunctionEnvironment[{name}]"
    FunctionEnvironment.__module__ = FunctionSession.__module__ = module.__name__
    setattr(module, "_agentbench_environment", FunctionEnvironment)  # pickled by reference: the module holds it
    return FunctionEnvironment


async def _called(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    return await result if inspect.isawaitable(result) else result


def _check_function(fn: Any, fname: str, params: tuple[str, ...], path: Path) -> None:
    if not callable(fn):
        raise ConfigError(f"{path}: {fname} is {type(fn).__name__}, not a function; define def {fname}({', '.join(params)}):")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError:
        raise ConfigError(f"{where(fn)}: {fname}() must take {len(params)} argument{'s' if len(params) != 1 else ''} "
                          f"({', '.join(params)})") from None  # fmt: skip
    except ValueError:
        return  # a builtin without a signature: nothing to check


def _check_returns(fn: Any, fname: str, allowed: tuple[type, ...], words: str) -> None:
    import typing

    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an annotation not resolvable here: nothing to check
        return
    if hint is None:
        return
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, __import__("types").UnionType) else (hint,)
    bad = [m for m in members if isinstance(m, type) and not issubclass(m, allowed)]
    if bad:
        raise ConfigError(f"{where(fn)}: {fname}() is declared to return {bad[0].__name__}; the engine expects {words}")
