"""``echo``: the engine's self-test environment (not an AgentBench environment).

Each task asks the model to repeat a sequence of numbers, one per turn, as ``ANSWER: <n>`` (text
mode) or a call of the ``answer`` tool (tools mode). It has no external state, so it measures the
engine itself (bench/throughput.py) and exercises every status in the engine tests:
no ``ANSWER:`` line -> ``invalid_format``; a non-integer answer -> ``invalid_action``; a wrong number
-> ``completed`` with score 0; all numbers right -> ``completed`` with score 1; more turns than the
task has numbers plus one -> ``task_limit_exceeded``.

Option ``cpu_ms`` (``--env-option echo.cpu_ms=N``): each step first spends N ms of CPU in Python code
(holding the GIL, in a thread so the event loop stays free), standing in for an environment whose steps
cost real CPU (a game engine) in bench/ray_scaling.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any

from ...environment import Environment, EpisodeContext, Message, ModelReply, Option, Outcome, Session, Step, Task, TaskFileError

_ANSWER = re.compile(r"ANSWER:\s*(\S+)")

_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "answer",
            "description": "Give the number asked for.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "integer"}},
                "required": ["value"],
            },
        },
    }
]


def _burn(ms: float) -> None:
    """Spend ``ms`` milliseconds of this thread's CPU time in Python code."""
    end = time.thread_time() + ms / 1000
    x = 0
    while time.thread_time() < end:
        for i in range(1000):
            x = (x * 31 + i) % 1_000_003


def _preamble(tokens: int) -> str:
    """About ``tokens`` tokens of fixed instructions before the task (option ``preamble_tokens``): an
    AgentBench-sized system prompt for bench/cost.py, identical for every task (a cacheable prefix)."""
    if tokens <= 0:
        return ""
    rules = []
    n = 0
    while sum(len(r) for r in rules) < tokens * 4:
        n += 1
        rules.append(f"Rule {n}: read the whole message before replying, and answer only with what the task asks for.\n")
    return "".join(rules) + "\n"


def _numbers(split: str, index: int, turns: int) -> list[int]:
    return [(index * 7919 + k * 104729 + (0 if split == "dev" else 13)) % 1000 for k in range(turns)]


class EchoEnvironment(Environment):
    name = "echo"
    description = "engine self-test: repeat numbers"
    max_turns = 4
    metric = "success rate"
    supports_tools = True
    hidden = True
    option_specs = {
        "tasks": Option("int", "tasks per split", minimum=0),
        "turns": Option("int", "numbers per task; 0: 1 to 3, varying", minimum=0),
        "cpu_ms": Option("number", "CPU milliseconds each step burns", minimum=0, above=False),
        "preamble_tokens": Option("int", "tokens of rules before the first question", minimum=0),
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cpu_ms = self.option("cpu_ms", 0.0)  # read once: every episode's session takes it
        turns = self.option("turns", 0)
        if turns >= type(self).max_turns:  # longer tasks (option turns) get their turns plus the one over the limit
            self.max_turns = turns + 1  # type: ignore[misc]

    def tasks(self, split: str) -> Iterator[Task]:
        if split not in ("dev", "test"):
            raise TaskFileError(f"echo: unknown split {split!r} (use dev or test)")
        n = self.option("tasks", 20 if split == "dev" else 50)
        turns = self.option("turns", 0)  # 0: 1..3 numbers, varying by task
        for i in range(n):
            k = turns or 1 + i % 3
            yield Task(env=self.name, split=split, task_id=f"{split}-{i:05d}", data={"numbers": _numbers(split, i, k)})

    def get_task(self, split: str, task_id: str) -> Task:
        try:
            index = int(task_id.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            raise TaskFileError(f"echo: bad task id {task_id!r}") from None
        turns = self.option("turns", 0) or 1 + index % 3
        return Task(env=self.name, split=split, task_id=task_id, data={"numbers": _numbers(split, index, turns)})

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        return _EchoSession(task, ctx, self._cpu_ms)


class _EchoSession(Session):
    def __init__(self, task: Task, ctx: EpisodeContext, cpu_ms: float = 0.0) -> None:
        self._numbers: list[int] = list(task.data["numbers"])
        self._cpu_ms = cpu_ms
        self._ctx = ctx
        self._pos = 0

    def tools(self) -> list[dict[str, Any]] | None:
        return _TOOLS if self._ctx.action_mode == "tools" else None

    def _ask(self) -> str:
        return f"Repeat this number: {self._numbers[self._pos]}"

    async def begin(self) -> list[Message]:
        how = "call the answer tool" if self._ctx.action_mode == "tools" else "reply with a line `ANSWER: <number>`"
        intro = f"You will be shown {len(self._numbers)} number(s), one per turn. Each time, {how}."
        preamble = _preamble(int(self._ctx.options.get("preamble_tokens", 0)))
        return [{"role": "user", "content": preamble + intro + "\n" + self._ask()}]

    def _parse(self, reply: ModelReply) -> tuple[str | None, str | None]:
        """Returns (raw answer text, format error)."""
        if self._ctx.action_mode == "tools":
            if not reply.tool_calls:
                return None, "no tool call"
            call = reply.tool_calls[0]
            try:
                return str(json.loads(call.arguments)["value"]), None
            except (ValueError, KeyError, TypeError):
                return None, f"bad arguments for {call.name}: {call.arguments[:80]}"
        match = _ANSWER.search(reply.content)
        if match is None:
            return None, "no ANSWER: line"
        return match.group(1), None

    def _observe(self, reply: ModelReply, text: str) -> list[Message]:
        if self._ctx.action_mode == "tools" and reply.tool_calls:
            return [{"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": text}]
        return [{"role": "user", "content": text}]

    async def step(self, reply: ModelReply) -> Step:
        if self._cpu_ms:
            await asyncio.to_thread(_burn, self._cpu_ms)
        raw, error = self._parse(reply)
        if raw is None:
            return Step(valid=False, error=error, outcome=Outcome(status="invalid_format", error=error))
        try:
            value = int(raw)
        except ValueError:
            err = f"not an integer: {raw[:40]!r}"
            return Step(action=f"answer({raw})", valid=False, error=err, outcome=Outcome(status="invalid_action", error=err))
        action = f"answer({value})"
        if value != self._numbers[self._pos]:
            return Step(action=action, outcome=Outcome(status="completed", score=0.0, success=False))
        self._pos += 1
        if self._pos == len(self._numbers):
            return Step(action=action, outcome=Outcome(status="completed", score=1.0, success=True))
        return Step(action=action, observation=self._observe(reply, "Correct. " + self._ask()))
