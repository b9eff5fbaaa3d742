"""Tools mode is AgentBench FC: whole episodes of the same task and replies, the project's requests against FC's own
task code (``<data-dir>/upstream-prompts/fc/src/server/tasks/...``, run with stubs for what it reaches: containers,
databases, SPARQL, WebShop, ALFWorld; tests/upstream_render.py), fed the same replies and the same environment answers.
Every request (system text, task message, tool and user messages, in order) and the ending are compared; only FC's
history rule (in THUDM/AgentRL, not available) is left out: both sides are compared on the whole conversation."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support import require
from upstream_render import ScriptedSession, fc_requests, load_upstream

from agentbench_async.envs.base import Environment, EpisodeContext, Task
from agentbench_async.envs.db import DBEnvironment
from agentbench_async.envs.upstream_prompts import FC, upstream_path
from agentbench_async.types import Message, ModelReply, ToolCall

pytestmark = pytest.mark.asyncio(loop_scope="module")

HAS_MARIADB = bool(shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK))


def _call(call_id: str, name: str, arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments if isinstance(arguments, str) else json.dumps(arguments))


async def _ours(env: Environment, task: Task, replies: list[ModelReply]) -> tuple[list[list[Message]], Any, list[str]]:
    """Our session driven as the engine drives it (the whole conversation sent each turn): every request, the outcome,
    and what the environment answered (db: each statement's result, in order), which FC's stubbed one then answers with."""
    session = await env.open_session(task, EpisodeContext(episode_id="fc", action_mode="tools"))
    results: list[str] = []
    run = getattr(session, "_run_sql", None)
    if run is not None:  # db: what the server answered each statement
        async def recorded(sql: str) -> str:
            results.append(await run(sql))
            return results[-1]

        session._run_sql = recorded  # type: ignore[attr-defined]
    try:
        messages = list(await session.begin())
        requests, outcome = [], None
        for reply in replies:
            requests.append([dict(m) for m in messages])
            step = await session.step(reply)
            messages += [reply.as_message(), *step.observation]
            if step.outcome is not None:
                outcome = step.outcome
                break
        return requests, outcome, results
    finally:
        await session.close()


def _same(ours: list[list[Message]], theirs: list[list[dict[str, Any]]]) -> None:
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert [{k: v for k, v in m.items() if v is not None} for m in a] == b, f"request {i + 1}"


# --------------------------------------------------------------------------------------------------- db
@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def db_env(official_data_dir: Path) -> AsyncIterator[DBEnvironment]:
    require(HAS_MARIADB, "mariadbd is not installed (apt-get install mariadb-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    environment = DBEnvironment(data_dir=official_data_dir, options={"statement_timeout": 5, "port": port})
    await environment.start()
    yield environment
    await environment.close()


def _fc_db(data_dir: Path, record: dict[str, Any], results: list[str], session: ScriptedSession) -> tuple[list, Any]:
    """FC's DBBenchTask.start_sample on ``record``; its database answers each statement with the next of ``results``."""
    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/dbbench/task.py"), "db_fc")
    answers = list(results)

    class Database:  # FC's MySQLDatabase, answering as our server did
        type = "mysql"

        def __init__(self, *args: Any) -> None:
            pass

        async def initialize(self) -> None:
            pass

        async def batch_execute(self, sql: Any) -> None:
            pass

        async def execute(self, sql: str, data: Any = ()) -> str:
            return answers.pop(0)

        async def delete(self) -> None:
            pass

    class Processor:  # grading is compared elsewhere (db.tool_grading): here only the conversation
        @staticmethod
        async def calculate_tables_hash_async(database: Any, entry: Any) -> str:
            return "hash"

        @staticmethod
        def compare_results(answer: Any, truth: Any, kind: str) -> bool:
            return True

    module.MySQLDatabase, module.DBResultProcessor = Database, Processor
    module.AgentCancelledException = type("AgentCancelledException", (Exception,), {})
    task = object.__new__(module.DBBenchTask)
    task.logger, task.max_round, task.db_root_dir = logging.getLogger("fc"), 15, None
    task.dataset = [(dict(record), record.get("label") or record.get("answer_md5"))]
    task.env_controller, task.env_controller_background_task = module.create_controller(), object()
    return fc_requests(task.start_sample, session, 0, session)


def _assistant(reply: ModelReply) -> dict[str, Any]:
    return {k: v for k, v in reply.as_message().items() if v is not None}


DB_SCRIPTS = {
    # no call (FC's notice, the round counts); three calls in one message, one of them unreadable and one unknown
    # (each answered in order); then the commit, with a call after it that never runs
    "answer": lambda table: [
        ModelReply(content="Let me look at the table first."),
        ModelReply(content="", tool_calls=[_call("a1", "execute_sql", {"query": f"SELECT COUNT(*) FROM `{table}`"}),
                                           _call("a2", "execute_sql", "{not json"),
                                           _call("a3", "drop_table", {"name": table}),
                                           _call("a4", "execute_sql", {"query": f"SELECT *\nFROM `{table}` LIMIT 2"})]),
        ModelReply(content="Done.", tool_calls=[_call("a5", "commit_final_answer", {"answers": ["1"]}),
                                                _call("a6", "execute_sql", {"query": f"DELETE FROM `{table}`"})]),
    ],
    # fifteen rounds without a commit: FC stops after the fifteenth round's calls ran (TASK_LIMIT_REACHED)
    "limit": lambda table: [ModelReply(content="", tool_calls=[_call(f"l{i}", "execute_sql", {"query": f"SELECT {i}"})]) for i in range(15)],
}


@pytest.mark.parametrize("script", sorted(DB_SCRIPTS))
async def test_db_tools_mode_is_fcs_rendering_of_whole_episodes(db_env: DBEnvironment, official_data_dir: Path, script: str) -> None:
    raw = [json.loads(line) for line in (official_data_dir / "dbbench" / "dev.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    tasks = list(db_env.tasks("dev"))
    picked = [0, 1, next(i for i, r in enumerate(raw) if r["type"][0] in ("INSERT", "UPDATE", "DELETE"))]
    for i in picked:
        task, record = tasks[i], raw[i]
        replies = DB_SCRIPTS[script](record["table"]["table_name"])
        ours, outcome, results = await _ours(db_env, task, replies)
        theirs, result = await asyncio.to_thread(_fc_db, official_data_dir, record, results, ScriptedSession([_assistant(r) for r in replies]))
        _same(ours, theirs)
        assert outcome is not None and result is not None, task.task_id
        assert (outcome.status, type(result.status).__name__ if not isinstance(result.status, type) else result.status.__name__) in (
            ("completed", "COMPLETED"), ("task_limit_exceeded", "TASK_LIMIT_REACHED"))
        assert outcome.status == ("completed" if script == "answer" else "task_limit_exceeded")
        if script == "limit":
            assert len(ours) == 15 and outcome.score == 0.0  # FC's reward 0 at the limit, the tables not graded
