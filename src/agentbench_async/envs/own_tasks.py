"""Tasks of the user's own for a built-in environment: ``--tasks ENV=PATH`` (repeatable), ``tasks: {ENV: PATH}`` in the
config, or the environment option ``tasks_file`` (all three are the same setting).

The file is in AgentBench's own format for that environment (``Environment.task_file_format`` says which); it is
read in full when the run's config is read, so a bad record is one line naming the file, the record and the field
before anything starts. The run stores the file's absolute path and sha256 among the environment's options (so a
changed file is a different run, and resuming it is refused), its episodes have source ``custom``, and the report
shows the tasks as a deviation beside the scores: they are not the paper's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..deviation import Deviation
from ..bounds import MAX_TASK_FILE_BYTES, mib, read_at_most
from ..errors import AgentBenchError, ConfigError
from . import env_class
from .options import TASKS_FILE, TASKS_SHA256

SOURCE = "custom"  # Task.source / episodes.source of such tasks


def parse_tasks_flags(items: list[str]) -> dict[str, str]:
    """``--tasks ENV=PATH`` values as ENV -> PATH; a malformed one is a ConfigError."""
    out: dict[str, str] = {}
    for item in items:
        env, sep, path = item.partition("=")
        if not sep or not env.strip() or not path.strip():
            raise ConfigError(f"--tasks {item!r}: expected ENV=PATH, e.g. os=my_os_tasks.json")
        out[env.strip()] = path.strip()
    return out


def merge_tasks_setting(raw: Any, env_options: dict[str, dict[str, Any]], where: str) -> None:
    """The config's ``tasks:`` mapping (ENV -> PATH) into the environments' options."""
    if raw is None:
        return
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in raw.items()):
        raise ConfigError(f"{where}: tasks: expected a mapping of environment names to task files, e.g. {{os: my_os_tasks.json}}")
    for env, path in raw.items():
        env_options.setdefault(env, {})[TASKS_FILE] = path


def settle_task_files(env_options: dict[str, dict[str, Any]], split: str, where: str) -> None:
    """Every environment given a task file of the user's own: the file read in full (one line for the first bad
    record), its absolute path and sha256 stored in the options. Called when the run's config is read."""
    for env, options in env_options.items():
        if not options.get(TASKS_FILE):
            continue
        cls = env_class(env)
        if not cls.task_file_format:
            raise ConfigError(f"{where}: tasks: {env} reads no task file of your own (os, db, kg and ltp do)")
        path = Path(str(options[TASKS_FILE])).expanduser().resolve()
        try:
            content = read_at_most(path, MAX_TASK_FILE_BYTES)  # bounded: --tasks os=/dev/zero ends at once
        except OSError as exc:
            raise ConfigError(f"{where}: tasks: {env}={path}: cannot read ({exc.strerror or exc}); give {cls.task_file_format}") from None
        if len(content) > MAX_TASK_FILE_BYTES:
            raise ConfigError(f"{where}: tasks: {env}={path}: larger than {mib(MAX_TASK_FILE_BYTES)}, too big for a task file; give "
                              f"{cls.task_file_format}")  # fmt: skip
        options[TASKS_FILE], options[TASKS_SHA256] = str(path), hashlib.sha256(content).hexdigest()
        try:
            count = sum(1 for _ in cls.read_task_file(path, split, options))
        except AgentBenchError as exc:
            raise ConfigError(f"{where}: tasks: {exc}") from None
        if count == 0:
            raise ConfigError(f"{where}: tasks: {env}={path} holds no task; give {cls.task_file_format}")


def own_task_file(env: str, config: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, sha256) of the task file of the user's own ``env`` played in a stored run, else None."""
    options = (config.get("env_options") or {}).get(env) or {}
    if not options.get(TASKS_FILE):
        return None
    return str(options[TASKS_FILE]), str(options.get(TASKS_SHA256) or "not recorded")


def own_task_deviations(config: Mapping[str, Any]) -> list[Deviation]:
    """One deviation per environment that played a task file of the user's own (shown beside its scores)."""
    out = []
    for env in config.get("envs") or []:
        own = own_task_file(env, config)
        if own is not None:
            out.append(Deviation(f"{env}.tasks", f"{own[0]} (sha256 {own[1]})", "the official tasks (--data-dir)",
                                 "your own tasks, not the paper's", envs=(env,)))  # fmt: skip
    return out
