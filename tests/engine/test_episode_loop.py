"""The episode loop: turn cap, history rewriting by the environment, environment failures as env_error."""

from __future__ import annotations

from collections.abc import Iterator

from agentbench_async.envs.base import Environment, EpisodeContext, Outcome, Session, Step, Task
from agentbench_async.episode import EpisodeSpec, run_episode
from agentbench_async.errors import EnvError
from agentbench_async.types import ModelReply


class _Session(Session):
    def __init__(self, fail_at: int | None) -> None:
        self.turn = 0
        self.fail_at = fail_at
        self.closed = False

    async def begin(self):
        return [{"role": "user", "content": "start"}]

    async def step(self, reply: ModelReply) -> Step:
        self.turn += 1
        if self.turn == self.fail_at:
            raise EnvError("sandbox died")
        return Step(observation=[{"role": "user", "content": f"obs {self.turn}"}], action="a", history_reply=reply.content.split("Observation:")[0])

    async def close(self) -> None:
        self.closed = True


class _Env(Environment):
    name = "loop-test"
    max_turns = 3

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.sessions: list[_Session] = []

    def tasks(self, split: str) -> Iterator[Task]:
        yield Task(env=self.name, split=split, task_id="t0", data={})

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        self.sessions.append(_Session(self.fail_at))
        return self.sessions[-1]


async def test_turn_cap_history_reply_and_transcript():
    env = _Env()
    seen: list[list[dict]] = []

    async def agent(messages, tools, turn, calls, caller):
        seen.append([dict(m) for m in messages])
        return ModelReply(content=f"Action {turn}\nObservation: made up by the model")

    record = await run_episode(env, EpisodeSpec(model="m", task=next(env.tasks("dev"))), agent)
    assert record.status == "task_limit_exceeded" and record.n_turns == 3
    # the model sees its earlier replies as the environment rewrote them ...
    assert seen[2][1]["content"] == "Action 1\n" and seen[2][3]["content"] == "Action 2\n"
    # ... while the transcript keeps what it really sent, with the observation it got
    assistant = [t for t in record.turns if t.role == "assistant"]
    assert assistant[0].content.endswith("made up by the model") and assistant[0].observation == "obs 1"
    assert [t.seq for t in record.turns] == list(range(len(record.turns)))
    assert env.sessions[0].closed


async def test_environment_failure_is_env_error_and_session_closed():
    env = _Env(fail_at=2)

    async def agent(messages, tools, turn, calls, caller):
        return ModelReply(content="x")

    record = await run_episode(env, EpisodeSpec(model="m", task=next(env.tasks("dev"))), agent)
    assert record.status == "env_error" and record.error == "sandbox died" and record.n_turns == 2
    assert record.outcome == Outcome(status="env_error", error="sandbox died")
    assert env.sessions[0].closed


class _ExamplesSession(Session):
    """Shows worked examples in the assistant role, at the start and again each round (as mind2web does), and
    re-inserts its rules as a user message it marks (``Step.injected``)."""

    async def begin(self):
        return [{"role": "user", "content": "rules"}, {"role": "assistant", "content": "Ok."}, {"role": "user", "content": "q0"}]

    async def step(self, reply: ModelReply) -> Step:
        examples = [{"role": "user", "content": "rules again"}, {"role": "assistant", "content": "Thought: an example answer"},
                    {"role": "user", "content": "next question"}]  # fmt: skip
        return Step(observation=examples, restart=True, injected=frozenset({0}), action="a")


class _ExamplesEnv(_Env):
    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        return _ExamplesSession()


async def test_environment_text_is_marked_injected_and_the_model_reply_never_is():
    env = _ExamplesEnv()

    async def agent(messages, tools, turn, calls, caller):
        return ModelReply(content=f"my answer {turn}")

    record = await run_episode(env, EpisodeSpec(model="m", task=next(env.tasks("dev"))), agent)
    marked = [(t.turn, t.role, t.content) for t in record.turns if t.injected]
    own = [t.content for t in record.turns if t.role == "assistant" and not t.injected]
    assert own == ["my answer 1", "my answer 2", "my answer 3"]
    assert marked == [(0, "assistant", "Ok.")] + [
        row for turn in (1, 2, 3) for row in ((turn, "user", "rules again"), (turn, "assistant", "Thought: an example answer"))
    ]
