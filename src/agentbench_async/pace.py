"""Whether the engine's own limits, rather than the server, set a run's pace: what ``agentbench run`` says about it
at the end. Two of the engine's limits can hold work the server would have taken: a model's limiter (its
``max_in_flight``, ``rpm``, ``tpm``: the wait before a request is sent, ``model_calls.queue_ms``) and the run's
``max_concurrency`` (episodes waiting for a place; or an environment's own capacity, where smaller). None is an error; said in one line each, a user running
against a local server that takes more knows which setting to raise."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .models import ModelConfig
from .records import CallRow
from .wording import duration

# a model's requests that waited at least this share of the time its answers took were paced by the engine
LIMITER_SHARE = 0.1
MIN_WAIT_S = 1.0  # and at least this long in all (a few requests at a burst's start are not a pace)


@dataclass
class PaceTally:
    """What a run waited on in the engine: per model the limiter's wait and the answers' time, and episodes'
    waits for a place under ``max_concurrency``."""

    queue_s: dict[str, float] = field(default_factory=dict)
    answer_s: dict[str, float] = field(default_factory=dict)
    admitted_after_wait: int = 0
    admission_wait_s: float = 0.0
    env_waits: dict[str, tuple[int, float]] = field(default_factory=dict)  # env -> (episodes, seconds) held by its capacity
    reported: set[str] = field(default_factory=set)  # models paced by rate limits their server reported (headers)

    def add_calls(self, calls: Iterable[CallRow]) -> None:
        for call in calls:
            if call.model is None:
                continue
            self.answer_s[call.model] = self.answer_s.get(call.model, 0.0) + call.latency_ms / 1000
            if call.rpm_limit is not None or call.tpm_limit is not None:
                self.reported.add(call.model)
            if call.queue_ms:
                self.queue_s[call.model] = self.queue_s.get(call.model, 0.0) + call.queue_ms / 1000

    def admitted(self, waited_s: float, env: str | None = None) -> None:
        """An episode admitted after ``waited_s`` seconds waiting for a place under ``max_concurrency`` (or, ``env``,
        under that environment's own capacity, when it is the smaller)."""
        if env is not None:
            n, seconds = self.env_waits.get(env, (0, 0.0))
            self.env_waits[env] = (n + 1, seconds + waited_s)
            return
        self.admitted_after_wait += 1
        self.admission_wait_s += waited_s

    def lines(self, models: Iterable[ModelConfig], judge: ModelConfig | None, max_concurrency: int, episodes: int) -> list[str]:
        """One line per limit of the engine that held work back long enough to set the pace (none: the server did)."""
        out = []
        for model, is_judge in [*((m, False) for m in models), *([(judge, True)] if judge is not None else [])]:
            waited, answered = self.queue_s.get(model.name, 0.0), self.answer_s.get(model.name, 0.0)
            if waited < MIN_WAIT_S or waited < LIMITER_SHARE * answered:
                continue
            flag = "--judge-max-in-flight" if is_judge else "--max-in-flight"
            out.append(f"{'judge ' if is_judge else ''}{model.name}: its requests waited {duration(waited)} in all in the engine's "
                       f"limiter before being sent (its answers took {duration(answered)}): its limits ({_limits(model, model.name in self.reported)}), "
                       f"not the server's speed, set the pace; where the server takes more, raise them ({flag}, --rpm, --tpm or the "
                       "config's)")  # fmt: skip
        if self.admitted_after_wait and self.admission_wait_s >= MIN_WAIT_S:
            mean = self.admission_wait_s / self.admitted_after_wait
            out.append(f"{self.admitted_after_wait:,} of {episodes:,} episodes waited for a place under max_concurrency "
                       f"{max_concurrency:,} ({duration(mean)} on average): the engine's limit, not the server's speed, set the "
                       "pace; where the server and this machine take more, raise it (--max-concurrency)")  # fmt: skip
        for env, (n, seconds) in sorted(self.env_waits.items()):
            if seconds >= MIN_WAIT_S:
                out.append(f"{n:,} {env} episodes waited for a place under the environment's own capacity "
                           f"({duration(seconds / n)} on average): {env}'s limit on episodes at once in this process, not the "
                           "server's speed, set its pace")  # fmt: skip
        return out


def _limits(model: ModelConfig, reported: bool) -> str:
    said = [f"max_in_flight {model.max_in_flight}"]
    said += [f"{name} {value}" for name, value in (("rpm", model.rpm), ("tpm", model.tpm)) if value not in (None, "auto")]
    if reported and (model.rpm in (None, "auto") or model.tpm in (None, "auto")):
        said.append("the rate limits its server reported")
    return ", ".join(said)
