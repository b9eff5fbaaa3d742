"""Helpers for tests: play one episode in-process with a mock policy as the model.

``play`` goes through the real episode loop (``episode.run_episode``): the policy's text goes to the
environment's parser, the environment acts and grades, exactly as in a run; only the HTTP hop of the
mock server is skipped (the engine tests cover that path).
"""

from __future__ import annotations

from typing import Any

from .envs.base import Environment, Policy, Task, run_policy
from .episode import EpisodeSpec, run_episode
from .errors import ConfigError, ContextLimitError
from .envs import env_class
from .records import CallRow, EpisodeRecord
from .types import Message, ModelReply, Usage


def _policy(env: type[Environment], name: str) -> Policy:
    policies = env.policies()
    if name not in policies:
        raise ConfigError(f"environment {env.name!r} has no mock policy {name!r} (has: {', '.join(policies) or 'none'})")
    return policies[name]


def policy_agent(env: type[Environment] | str, policy_name: str, task: Task, episode_id: str):  # type: ignore[no-untyped-def]
    """An ``AgentFn`` answering with a mock policy of environment ``env`` (its class: an environment not installed yet
    plays too, or its registered name), without HTTP."""
    policy = _policy(env_class(env) if isinstance(env, str) else env, policy_name)

    async def agent(messages: list[Message], tools: list[dict[str, Any]] | None, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        calls.append(CallRow(turn=turn, attempt=1, http_status=200, latency_ms=0.0, caller=caller, model=f"mock-{policy_name}"))
        reply = run_policy(policy, task, messages, tools, episode_id)
        if reply.fail == "context_length":
            calls[-1].http_status = 400
            raise ContextLimitError("mock policy: prompt too long")
        return ModelReply(content=reply.content, tool_calls=reply.tool_calls, finish_reason="stop", usage=Usage())

    return agent


async def play(
    env: Environment,
    task: Task,
    policy: str = "oracle",
    *,
    action_mode: str = "text",
    judge_policy: str | None = "judge",
    history: str = "full",
    repeat: int = 0,
) -> EpisodeRecord:
    """Play one episode with a mock policy; returns the record (``.outcome``, ``.n_turns``, ``.turns``)."""
    spec = EpisodeSpec(model=f"mock-{policy}", task=task, repeat=repeat, action_mode=action_mode, history=history)
    agent = policy_agent(type(env), policy, task, spec.episode_id)
    judge = None
    if judge_policy and judge_policy in type(env).policies():
        judge = policy_agent(type(env), judge_policy, task, spec.episode_id + "#judge")
    return await run_episode(env, spec, agent, judge)
