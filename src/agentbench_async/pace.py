"""Whether the engine's own limits, rather than the server, set a run's pace: what ``agentbench run`` says about it
at the end. Two of the engine's limits can hold work the server would have taken: a model's limiter (its
``max_in_flight``, ``rpm``, ``tpm``: the wait before a request is sent, ``model_calls.queue_ms``) and the run's
``max_concurrency`` (episodes waiting for a place; or an environment's own capacity, where smaller). None is an error; said in one line each, a user running
against a local server that takes more knows which setting to raise."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .limits import in_flight_cap
from .models import ModelConfig
from .records import CallRow
from .wording import duration

# a model's requests that waited at least this share of the time its answers took were paced by the engine
LIMITER_SHARE = 0.1
MIN_WAIT_S = 1.0  # and at least this long in all (a few requests at a burst's start are not a pace)
ENV_SHARE = 0.5  # episodes whose model calls took less than this share of their time were paced by the environment
SERVER_QUEUE_SHARE = 0.5  # a model's requests that waited in the server's own queue this share of their time: the server's pace


@dataclass
class PaceTally:
    """What a run waited on in the engine: per model the limiter's wait and the answers' time, and episodes'
    waits for a place under ``max_concurrency``."""

    queue_s: dict[str, float] = field(default_factory=dict)
    answer_s: dict[str, float] = field(default_factory=dict)
    # (model, env) -> seconds that stream's next episode waited for a place, in all: under max_concurrency, or under the
    # environment's own capacity (env -> its capacity) where that is the smaller. A stream admits one episode at a time,
    # so its total is how long the limit held that model's episodes of that environment back
    held_s: dict[tuple[str, str], float] = field(default_factory=dict)
    env_held_s: dict[tuple[str, str], float] = field(default_factory=dict)
    capacities: dict[str, int] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)  # models paced by rate limits their server reported (headers)
    # model -> seconds its requests waited in the server's own queue, where the server says so (model_calls.server_queue_ms)
    server_queue_s: dict[str, float] = field(default_factory=dict)
    # model -> (its connection limit: max_connections or what refusals cut it to at the least, refused connections): the
    # limit its limiter also held requests to (limits.py), and the server's backpressure
    connections: dict[str, tuple[int, int]] = field(default_factory=dict)
    # env -> (its episodes' wall seconds, of which their model calls' seconds): where most of an episode's time is the
    # environment's own (a sandbox's apt, a database), the pace is not the server's, and the lines say so
    env_s: dict[str, tuple[float, float]] = field(default_factory=dict)

    def add_episode(self, env: str, wall_s: float, calls: Iterable[CallRow]) -> None:
        """An episode of ``env`` that ran ``wall_s`` seconds with these calls (their HTTP time is the model's share)."""
        wall, model = self.env_s.get(env, (0.0, 0.0))
        self.env_s[env] = (wall + wall_s, model + sum(c.latency_ms for c in calls) / 1000)

    def _env_bound(self, env: str) -> str:
        """``; ENV's episodes spent X of their Y in the environment's own steps ...`` when that is most of their time."""
        wall, model = self.env_s.get(env, (0.0, 0.0))
        if wall < MIN_WAIT_S or model >= ENV_SHARE * wall:
            return ""
        return (f"; {env}'s episodes spent {duration(wall - model)} of their {duration(wall)} in the environment's own steps, not "
                "waiting for the model: more at once needs room on this machine for the environment, not a faster server")  # fmt: skip

    def connected(self, model: str, fewest: int | None, refusals: int) -> None:
        """``model``'s connections at the end: the fewest its limit was cut to (None: never cut) and the connections the
        loaded server refused or let time out."""
        if fewest is not None or refusals:
            self.connections[model] = (fewest or 0, refusals)

    def add_calls(self, calls: Iterable[CallRow]) -> None:
        for call in calls:
            if call.model is None:
                continue
            self.answer_s[call.model] = self.answer_s.get(call.model, 0.0) + call.latency_ms / 1000
            if call.rpm_limit is not None or call.tpm_limit is not None:
                self.reported.add(call.model)
            if call.queue_ms:
                self.queue_s[call.model] = self.queue_s.get(call.model, 0.0) + call.queue_ms / 1000
            if call.server_queue_ms:
                self.server_queue_s[call.model] = self.server_queue_s.get(call.model, 0.0) + call.server_queue_ms / 1000

    def admitted(self, model: str, env: str, waited_s: float, capacity: int | None = None) -> None:
        """``model``'s next episode of ``env`` admitted after ``waited_s`` seconds waiting for a place under
        ``max_concurrency`` (or under the environment's own ``capacity``, when that is the smaller and was full)."""
        held = self.held_s if capacity is None else self.env_held_s
        held[(model, env)] = held.get((model, env), 0.0) + waited_s
        if capacity is not None:
            self.capacities[env] = capacity

    def lines(self, models: Iterable[ModelConfig], judge: ModelConfig | None, max_concurrency: int) -> list[str]:
        """One line per limit of the engine that held work back long enough to set the pace (none: the server did)."""
        out = []
        paced = set()  # models whose requests waited in their limiter: more episodes at once would have waited there too
        for model, is_judge in [*((m, False) for m in models), *([(judge, True)] if judge is not None else [])]:
            waited, answered = self.queue_s.get(model.name, 0.0), self.answer_s.get(model.name, 0.0)
            fewest, refused = self.connections.get(model.name, (0, 0))
            if waited < MIN_WAIT_S or waited < LIMITER_SHARE * answered:
                if refused:
                    out.append(_refusals_line(model, fewest, refused, is_judge))
                continue
            paced.add(model.name)
            prefix = f"{'judge ' if is_judge else ''}{model.name}: its requests waited {duration(waited)} in all"
            connections = fewest or model.max_connections
            if connections < in_flight_cap(model.max_in_flight):  # the connections, not max_in_flight, held them
                flag = "--judge-max-connections" if is_judge else "--max-connections"
                server = (f"; the server refused or let time out {refused:,} connections while it answered others, each a pause and "
                          f"not counted as a retry; the limit was cut to {fewest:,} at the least") if refused else ""  # fmt: skip
                out.append(f"{prefix} for one of its {connections:,} connections to the server before being sent (its answers took "
                           f"{duration(answered)}): the connection limit (max_connections {model.max_connections:,}{server}), not "
                           f"max_concurrency, held them back; where the server takes more connections at once, raise it ({flag} or "
                           "the config's max_connections)")  # fmt: skip
                continue
            flag = "--judge-max-in-flight" if is_judge else "--max-in-flight"
            out.append(f"{prefix} in the engine's "
                       f"limiter before being sent (its answers took {duration(answered)}): its limits ({_limits(model, model.name in self.reported)}), "
                       f"not the server's speed, set the pace; where the server takes more, raise them ({flag}, --rpm, --tpm or the "
                       "config's)")  # fmt: skip
        # a server that queued a model's requests most of the time they took answers few at a time: it set the pace, and
        # more episodes at once would only wait in its queue (a one-slot llama.cpp server is not a concurrency problem)
        queued = {name for name, seconds in self.server_queue_s.items() if seconds >= SERVER_QUEUE_SHARE * self.answer_s.get(name, 0.0)}
        for name in sorted(queued):
            if self.server_queue_s[name] >= MIN_WAIT_S:
                out.append(f"{name}: its requests waited {duration(self.server_queue_s[name])} of the {duration(self.answer_s[name])} "
                           "they took in the server's own queue (the server said so): the server answers few requests at a "
                           "time and set the pace, not the engine; more concurrency would only wait there (give the server "
                           "more parallel slots to go faster)")  # fmt: skip
        held = {key: seconds for key, seconds in self.held_s.items() if key[0] not in paced and key[0] not in queued}
        if held and (longest := max(held.values())) >= MIN_WAIT_S:
            (model, env) = max(held, key=held.__getitem__)
            bound = self._env_bound(env)
            out.append(f"max_concurrency {max_concurrency:,} held episodes back: {model}'s {env} episodes waited "
                       f"{duration(longest)} in all for a place, the longest of any model and environment; the engine's limit, "
                       f"not the server's speed, set the pace{bound}; where the server and this machine take more, raise it "
                       "(--max-concurrency)")  # fmt: skip
        for env in sorted(self.capacities):
            longest = max(seconds for (_, e), seconds in self.env_held_s.items() if e == env)
            if longest >= MIN_WAIT_S:
                out.append(f"{env}'s capacity ({self.capacities[env]:,} episodes at once in this process) held its episodes "
                           f"back: a model's {env} episodes waited up to {duration(longest)} in all for a place; the "
                           f"environment, not the server's speed, set its pace{self._env_bound(env)}")  # fmt: skip
        return out


def _refusals_line(model: ModelConfig, fewest: int, refused: int, is_judge: bool) -> str:
    flag = "--judge-max-connections" if is_judge else "--max-connections"
    return (f"{'judge ' if is_judge else ''}{model.name}: the server refused or let time out {refused:,} connections while it "
            f"answered others: each was backpressure (a pause, fewer connections: cut to {fewest:,} at the least), not counted as a "
            f"retry; a max_connections at what the server takes at once ({flag}) avoids them")  # fmt: skip


def _limits(model: ModelConfig, reported: bool) -> str:
    said = [f"max_in_flight {model.max_in_flight}"]
    said += [f"{name} {value}" for name, value in (("rpm", model.rpm), ("tpm", model.tpm)) if value not in (None, "auto")]
    if reported and (model.rpm in (None, "auto") or model.tpm in (None, "auto")):
        said.append("the rate limits its server reported")
    return ", ".join(said)
