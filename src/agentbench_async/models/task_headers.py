"""The headers that tell the built-in mock model which task, episode and caller a request is for.

The engine sends them only for models configured with ``task_header: true`` (the demo and the tests do); the mock
server (``mock/server.py``) reads them to pick the task's policy and to seed its random choices.
"""

from __future__ import annotations

TASK_HEADER = "X-AgentBench-Task"  # "<env>/<split>/<source>/<task_id>"
EPISODE_HEADER = "X-AgentBench-Episode"  # the episode id (seeds the policy's random choices)
CALLER_HEADER = "X-AgentBench-Caller"  # "agent" or "judge"
