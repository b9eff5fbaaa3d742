"""Policies of the built-in mock model.

A policy answers one chat request for one task. Each environment, built-in or plugin, gives its policies
through ``Environment.policies()`` (by default ``POLICIES: dict[str, Policy]`` of the ``policies.py`` beside
it) with at least ``oracle`` (plays the task's reference solution through the real protocol) and ``weak``
(reaches every failure status the environment can emit); environments with a model-as-judge also ship
``judge``. The mock keeps no table of environments: it asks the class the task's environment name resolves to.

The policy protocol (``Policy``, ``PolicyRequest``, ``PolicyReply``, ``stable_choice``, ``run_policy``) is part of the
environment API (``envs/base.py``, offered as ``agentbench_async.environment``): the mock consumes it. The mock server
learns which task a request belongs to from the headers of ``models/task_headers.py``, which the engine sends only for
models configured with ``task_header: true`` (the demo and tests do).
"""

from __future__ import annotations

import functools

from ..envs import env_class
from ..envs.base import Environment, Policy

__all__ = ["env_policies"]


def env_policies(env_name: str) -> dict[str, Policy]:
    """The policies environment ``env_name`` (built-in, plugin or file) ships: ``Environment.policies()``, asked once per
    class and process (the mock asks on every request; a file environment edited and loaded again is a new class)."""
    return _policies_of(env_class(env_name))


@functools.cache
def _policies_of(cls: type[Environment]) -> dict[str, Policy]:
    return dict(cls.policies())
