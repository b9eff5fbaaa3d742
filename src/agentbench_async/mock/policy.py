"""Policies of the built-in mock model.

A policy answers one chat request for one task. Each environment, built-in or plugin, gives its policies
through ``Environment.policies()`` (by default ``POLICIES: dict[str, Policy]`` of the ``policies.py`` beside
it) with at least ``oracle`` (plays the task's reference solution through the real protocol) and ``weak``
(reaches every failure status the environment can emit); environments with a model-as-judge also ship
``judge``. The mock keeps no table of environments: it asks the class the task's environment name resolves to.

The mock server learns which task a request belongs to from the ``X-AgentBench-Task`` header, which
the engine sends only for models configured with ``task_header: true`` (the demo and tests do).
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..envs.base import Task
from ..types import Message, ToolCall

TASK_HEADER = "X-AgentBench-Task"  # "<env>/<split>/<source>/<task_id>"
EPISODE_HEADER = "X-AgentBench-Episode"  # the episode id (seeds the policy's random choices)
CALLER_HEADER = "X-AgentBench-Caller"  # "agent" or "judge"


@dataclass
class PolicyRequest:
    task: Task
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    episode_id: str

    @property
    def turn(self) -> int:
        """0-based index of the assistant turn being asked for."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @functools.cached_property
    def rng(self) -> random.Random:
        """Random choices seeded by episode and turn: the same on every machine and re-run."""
        return random.Random(f"{self.episode_id}#{self.turn}")


@dataclass
class PolicyReply:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Ask the server to answer like a provider whose context window is full (HTTP 400,
    # code context_length_exceeded) instead of replying.
    fail: Literal["context_length"] | None = None


Policy = Callable[[PolicyRequest], PolicyReply]


def stable_choice(key: str, n: int) -> int:
    """A deterministic pick in ``range(n)`` from a string (same on every machine and run)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


@functools.cache
def env_policies(env_name: str) -> dict[str, Policy]:
    """The policies environment ``env_name`` (built-in or plugin) ships: ``Environment.policies()`` (asked once per
    process: the mock asks on every request)."""
    from ..envs import env_class

    return dict(env_class(env_name).policies())


def run_policy(policy: Policy, task: Task, messages: list[Message], tools: list[dict[str, Any]] | None, episode_id: str) -> PolicyReply:
    """Ask a policy for the next reply (the mock server and ``testing.play`` both go through here)."""
    return policy(PolicyRequest(task=task, messages=messages, tools=tools, episode_id=episode_id))
