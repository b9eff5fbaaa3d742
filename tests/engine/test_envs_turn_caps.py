"""`agentbench envs` shows each environment's turn cap per action mode where they differ (issue 36: webshop showed 20,
tools mode's, while text mode stops at AgentBench v0.2's 10 rounds; alfworld 35 in text, FC's 20 in tools)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from agentbench_async.envs import env_class


def test_envs_lists_the_cap_of_each_action_mode() -> None:
    proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "envs"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "80"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    caps = dict(re.findall(r"^│ (\w+)\s+│.*│\s+([\d /]+?) │ (?:yes|no)", proc.stdout, re.M))
    assert caps["webshop"] == "10 / 20" and caps["alfworld"] == "35 / 20"  # text / tools
    assert caps["os"] == "8" and caps["card_game"] == "320"  # one cap: the same in both modes, or text only
    assert "'text / tools' where the action modes differ" in " ".join(proc.stdout.split())
    assert env_class("webshop").turn_cap("text") == 10 and env_class("webshop").turn_cap("tools") == 20
