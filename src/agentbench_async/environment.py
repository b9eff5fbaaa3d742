"""The public environment API: everything an environment (built-in or an installed plugin) may use, under stable names.

Import from here, never from the engine's private modules (``agentbench_async.envs.base`` and the like may move);
the built-in environments do the same, besides what is theirs alone: their packaged data (``resources``),
AgentBench's prompt files (``envs.upstream_prompts``) and mind2web's use of AgentBench's history budget. ``docs/writing-an-environment.md`` walks through a whole plugin, and
``agentbench new-env NAME --out DIR`` writes one that runs at once. A small environment needs no package: one Python
file, run with ``--env ./my_env.py``, holding a subclass of ``Environment`` or the functional form (tasks, a step
function and a scorer: ``agentbench_async.envs.files``, ``docs/examples/guess_number.py``).

The contract in short (``Environment``'s and ``Session``'s docstrings say each part in full):

- an ``Environment`` is made once per run and process with ``data_dir`` and its ``options`` (checked against
  ``option_specs`` when the run's config is read: a bad one is a one-line ``ConfigError`` before anything starts);
  ``start()``/``close()`` hold run-wide resources, ``capacity`` caps its episodes in flight, ``tasks(split)`` lists
  ``Task`` records (a bad task file is one ``TaskFileError`` line naming the file, the record and the field);
  ``supports_tools`` says whether it has a tools mode besides text; ``deviations()`` names its differences from
  AgentBench v0.2, shown beside the scores; ``policies()`` gives the mock model's ``oracle`` and ``weak`` players;
- a ``Session`` plays one episode: ``begin()`` returns the first messages, ``step(reply)`` parses one model reply,
  acts and returns a ``Step`` (an ``Outcome`` when the episode ends), ``close()`` frees what the episode held;
- the environment guarantees: model text is hostile input (parsed, never evaluated, no host access from it); a
  malformed reply is a ``Step`` with status ``invalid_format``/``invalid_action``, never an exception; an
  infrastructure failure raises ``EnvError`` (the episode is recorded ``env_error`` and the run goes on); nothing
  blocks the event loop (``asyncio.to_thread`` / ``asyncio.create_subprocess_exec``).

A worked example, an environment whose tasks ask for one word::

    from agentbench_async.environment import Environment, EpisodeContext, Outcome, Session, Step, Task

    class Echo(Session):
        def __init__(self, task: Task) -> None:
            self.word = task.data["word"]

        async def begin(self):
            return [{"role": "user", "content": f"Reply with the word {self.word!r} and nothing else."}]

        async def step(self, reply):
            done = reply.content.strip() == self.word
            return Step(action=reply.content.strip()[:40], outcome=Outcome("completed", float(done), done))

    class WordEnvironment(Environment):
        name = "word"  # the entry point's name: [project.entry-points."agentbench_async.environments"] word = "pkg:WordEnvironment"
        max_turns = 1

        def tasks(self, split):
            for i, word in enumerate(["apple", "pear"]):
                yield Task(env=self.name, split=split, task_id=str(i), data={"word": word})

        async def open_session(self, task, ctx: EpisodeContext):
            return Echo(task)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import statuses
from .deviation import Deviation
from .envs import PLUGIN_GROUP
from .envs.base import (SPLITS, ActionMode, Environment, EpisodeContext, JudgeFn, Outcome, Policy, PolicyReply, PolicyRequest, Session,
                        Split, Step, Task, stable_choice)
from .envs.options import Option, bool_option, choice_option, int_option, number_option, range_option, text_option
from .envs.taskfiles import missing_file, read_json, read_text
from .errors import AgentBenchError, ConfigError, ContextLimitError, EnvError, EnvUnavailableError, ModelError, TaskFileError
from .processes import lower_priority, pid_alive
from .testing import play
from .types import Message, ModelReply, ToolCall

if TYPE_CHECKING:  # imported on first use (see __getattr__): aiohttp is not needed to run an environment
    from .models.network import client_session, request_kwargs, route

__all__ = [
    "PLUGIN_GROUP",
    "SPLITS",
    "ActionMode",
    "AgentBenchError",
    "ConfigError",
    "ContextLimitError",
    "Deviation",
    "EnvError",
    "EnvUnavailableError",
    "Environment",
    "EpisodeContext",
    "JudgeFn",
    "Message",
    "ModelError",
    "ModelReply",
    "Option",
    "Outcome",
    "Policy",
    "PolicyReply",
    "PolicyRequest",
    "Session",
    "Split",
    "Step",
    "Task",
    "TaskFileError",
    "ToolCall",
    "bool_option",
    "choice_option",
    "client_session",
    "int_option",
    "lower_priority",
    "missing_file",
    "number_option",
    "pid_alive",
    "play",
    "range_option",
    "read_json",
    "read_text",
    "request_kwargs",
    "route",
    "stable_choice",
    "statuses",
    "text_option",
]


def __getattr__(name: str) -> object:
    """``route``, ``client_session``, ``request_kwargs`` on first use: they import aiohttp, which an environment
    that makes no HTTP call (the os sandbox run by Debian's own python3, say) need not have."""
    if name in ("client_session", "request_kwargs", "route"):
        from .models import network

        return getattr(network, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
