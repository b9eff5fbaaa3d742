"""``Deviation``: one result-deciding setting of a run that is not AgentBench v0.2's.

A small value type at the bottom of the package: environments name their own differences with it
(``Environment.deviations()``), ``settings.py`` lists a run's, ``report`` prints them beside the scores.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    """One result-deciding setting of a run that is not AgentBench v0.2's."""

    setting: str  # e.g. "history", "ltp.rounds", "models[0].context_window"
    value: str  # the run's value
    agentbench: str  # AgentBench v0.2's behaviour
    note: str = "not comparable to the paper"
    envs: tuple[str, ...] = ()  # the environments whose scores it concerns; empty: every environment of the run

    def line(self) -> str:
        return f"{self.setting}: {self.value} — {self.note} (AgentBench v0.2: {self.agentbench})"

    def concerns(self, env: str) -> bool:
        """Whether this difference bears on ``env``'s scores."""
        return not self.envs or env in self.envs
