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
        requests, outcome, _ = await _drive(session, replies)
        return requests, outcome, results
    finally:
        await session.close()


async def _drive(session: Any, replies: list[ModelReply], unanswered: str | None = None) -> tuple[list[list[Message]], Any, list[Any]]:
    """Our session driven as the engine drives it (the whole conversation sent each turn) until it ends or the replies
    run out: every request (our answers ``unanswered`` to the calls FC leaves unanswered left out), the outcome and
    every step."""
    messages = list(await session.begin())
    requests, steps = [], []
    for reply in replies:
        requests.append([dict(m) for m in messages if unanswered is None or m.get("content") != unanswered])
        steps.append(await session.step(reply))
        messages += [reply.as_message(), *steps[-1].observation]
        if steps[-1].outcome is not None:
            break
    return requests, steps[-1].outcome, steps


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


# --------------------------------------------------------------------------------------------------- kg
def _listing_sorted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``Observation: [a, b]`` lists in sorted order: FC shows Python's set order (a hash order that changes between
    interpreter runs), the project sorts them (docs/envs/kg.md); the items must be the same."""
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "tool" and isinstance(content, str) and content.startswith("Observation: [") and content.endswith("]"):
            items = [i for i in content[len("Observation: ["):-1].split(", ") if i]
            m = {**m, "content": "Observation: [" + ", ".join(sorted(items)) + "]"}
        out.append(m)
    return out


def _fc_kg(data_dir: Path, task: Task, toolbox: Any, session: ScriptedSession) -> tuple[list, Any]:
    """FC's KnowledgeGraph.sync_start_sample with FC's own API (api.py): its SPARQL answered from what our toolbox
    listed for the same variable (FC's programs rewritten into ours), its vocabulary and ranges our ontology's."""
    import io
    import re

    ontology = toolbox.ontology
    vocab = json.dumps({"relations": sorted(ontology.relations), "attributes": sorted(ontology.attributes)})
    api = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/knowledgegraph/api.py"), "kg_fc_api",
                        preset={"open": lambda *a, **k: io.StringIO(vocab)})
    api.postprocess_raw_code = api.lisp_to_sparql = lambda program: program
    api.range_info = dict(ontology.ranges)

    def ours(program: str) -> str:  # FC's (JOIN r_inv p) is the project's (JOIN (R r) p)
        return re.sub(r"\(JOIN (\S+)_inv ", r"(JOIN (R \1) ", program)

    class Executer:
        def __init__(self, url: Any) -> None:
            pass

        def get_out_relations(self, entity: str) -> list[str]:
            return list(toolbox.relations_seen.get(entity, []))

        def execute_query(self, query: str) -> list[str]:
            key = ours(query.split("\n")[0])
            return [*toolbox.relations_seen.get(key, []), *toolbox.attributes_seen.get(key, [])]

    class Controller:
        def sync_start_session(self, kind: Any) -> tuple[str, None, dict[Any, str]]:
            return "s", None, {kind: "http://sparql"}

        def sync_end_session(self, session_id: str) -> None:
            pass

    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/knowledgegraph/task.py"), "kg_fc")
    const = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/knowledgegraph/const.py"), "kg_fc_const")
    for name in ("INSTRUCTIONS", "ONE_SHOT", "TOOLS", "TOOLS_PARAM_ORDER"):  # its `from .const import *`
        setattr(module, name, getattr(const, name))
    module.API, module.SparqlExecuter = api.API, Executer
    module.AgentCancelledException = type("AgentCancelledException", (Exception,), {})
    fc = object.__new__(module.KnowledgeGraph)
    fc.logger, fc.max_rounds, fc.one_shot, fc.env_controller = logging.getLogger("fc"), 15, True, Controller()
    fc.inputs, fc.targets = [{"question": task.data["question"], "entities": dict(task.data["entities"])}], [set(task.data["gold"])]
    return fc_requests(fc.sync_start_sample, session, 0, session)


def _kg_calls(actions: list[str], names: dict[str, str], prefix: str) -> list[ToolCall]:
    """The oracle's actions (``get_neighbors(m.x,rel)``) as FC tool calls, entities by name where the task names them."""
    from agentbench_async.envs.kg.tools import TOOL_PARAMS

    by_id = {v: k for k, v in names.items()}
    calls = []
    for i, action in enumerate(actions):
        name, _, rest = action.partition("(")
        values = [by_id.get(v.strip(), v.strip()) for v in rest[:-1].split(",")]
        calls.append(_call(f"{prefix}{i}", name, dict(zip(TOOL_PARAMS[name], values))))
    return calls


KG_SCRIPTS = {
    # a reply without a call (FC's notice); every oracle action in one message with failing calls between them (bad
    # JSON, a function FC's API lacks, a missing argument, a variable that does not exist, an entity where a variable
    # belongs, an id FC refuses), all answered in order; then the final answer
    "answer": lambda calls, n: [
        ModelReply(content="I will look at the entities first."),
        ModelReply(content="", tool_calls=[calls[0], _call("x1", "get_neighbors", "{not json"), _call("x2", "final_execute", {"variable": "#0"}),
                                           *calls[1:3], _call("x3", "get_neighbors", {"variable": "#0"}),
                                           _call("x4", "count", {"variable": "#9"}), _call("x5", "count", {"variable": "Thriller"}),
                                           _call("x6", "get_relations", {"variable": "g.123"}), *calls[3:]]),
        ModelReply(content=f"Thought: done.\nFinal Answer: #{n - 1}\nObservation: ignored"),
    ],
    # one call a message, then a final answer naming no variable: FC ends the sample AGENT_VALIDATION_FAILED
    "unknown variable": lambda calls, n: [*[ModelReply(content="", tool_calls=[c]) for c in calls], ModelReply(content="Final Answer: #42")],
}


@pytest.mark.parametrize("script", sorted(KG_SCRIPTS))
async def test_kg_tools_mode_is_fcs_rendering_of_whole_episodes(official_data_dir: Path, script: str) -> None:
    from agentbench_async.envs import make_env
    from agentbench_async.envs.kg.prompts import load_prompts
    from agentbench_async.envs.kg.session import KGSession
    from agentbench_async.envs.kg.tools import Toolbox

    env = make_env("kg")  # the built-in graph in the embedded store; FC's wording from the pulled files
    await env.start()
    try:
        task = next(t for t in env.tasks("test") if "which thriller films did ilse varga direct" in t.data["question"])
        calls = _kg_calls(task.data["actions"], task.data["entities"], "c")
        variables = sum(1 for a in task.data["actions"] if not a.startswith(("get_relations", "get_attributes")))
        replies = KG_SCRIPTS[script](calls, variables)
        toolbox = Toolbox(env._backend, env._ontology)  # type: ignore[attr-defined]
        session = KGSession(task, EpisodeContext(episode_id="fc", action_mode="tools"), toolbox, load_prompts(official_data_dir, "tools"))
        ours, outcome, _ = await _drive(session, replies)
    finally:
        await env.close()
    theirs, result = await asyncio.to_thread(_fc_kg, official_data_dir, task, toolbox, ScriptedSession([_assistant(r) for r in replies]))
    _same([_listing_sorted(r) for r in ours], [_listing_sorted(r) for r in theirs])
    ended = result.status.__name__
    assert (outcome.status, outcome.paper_status, ended) == {
        "answer": ("completed", "completed", "COMPLETED"),
        "unknown variable": ("invalid_format", "agent validation failed", "AGENT_VALIDATION_FAILED")}[script]
    if script == "answer":
        assert outcome.score == 1.0  # every oracle call ran, in order, between the failing ones


# --------------------------------------------------------------------------------------------------- webshop
def _fc_webshop(data_dir: Path, pages: list[tuple[str, Any]], steps: list[tuple[str, tuple[Any, ...]]],
                session: ScriptedSession) -> tuple[list, Any]:
    """FC's WebShop.sync_start_sample with its WebAgentTextEnv answering as our site did: the first page, then for each
    action (which must be the one our site ran) the page after it."""
    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/webshop/task.py"), "webshop_fc")
    shown = list(pages)

    class Site:
        def __init__(self, **kwargs: Any) -> None:
            self.observation, self.available = shown.pop(0)

        def reset(self, index: int) -> None:
            pass

        def get_available_actions(self) -> Any:
            return self.available

        def step(self, action: str) -> tuple[Any, ...]:
            expected, (observation, available, reward, done) = steps.pop(0)
            assert action == expected, (action, expected)
            self.observation, self.available = observation, available
            return observation, reward, done, {}

        def close(self) -> None:
            pass

    module.WebAgentTextEnv = Site
    module.AgentCancelledException = type("AgentCancelledException", (Exception,), {})
    fc = object.__new__(module.WebShop)
    fc.logger, fc.max_rounds, fc.server = logging.getLogger("fc"), 20, None
    return fc_requests(fc.sync_start_sample, session, 0, session)


WEBSHOP_SCRIPTS = {
    # no call; a search with a second call FC leaves unanswered; a function FC does not know; unreadable arguments;
    # then the reference purchase (product, options, Buy Now)
    "buy": lambda ref: [
        ModelReply(content="Let me think about the keywords."),
        ModelReply(content="", tool_calls=[_call("s1", "search_action", {"keywords": ref["search"]}), _call("s2", "click_action", {"value": "Next >"})]),
        ModelReply(content="", tool_calls=[_call("s3", "checkout", {})]),
        ModelReply(content="", tool_calls=[_call("s4", "click_action", "{not json")]),
        *[ModelReply(content="", tool_calls=[_call(f"c{i}", "click_action", {"value": v})]) for i, v in enumerate([ref["asin"], *ref["options"]])],
        ModelReply(content="", tool_calls=[_call("b", "click_action", {"value": "Buy Now"})]),
    ],
    # twenty searches: FC's round limit
    "limit": lambda ref: [ModelReply(content="", tool_calls=[_call(f"l{i}", "search_action", {"keywords": f"{ref['search']} {i}"})]) for i in range(20)],
}


@pytest.mark.parametrize("script", sorted(WEBSHOP_SCRIPTS))
async def test_webshop_tools_mode_is_fcs_rendering_of_whole_episodes(official_data_dir: Path, script: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench_async.envs import make_env
    from agentbench_async.envs.webshop.protocol import NOT_RUN, load_tool_texts
    from agentbench_async.envs.webshop.session import WebShopSession

    env = make_env("webshop")  # the built-in catalogue; FC's wording from the pulled files
    shop = await asyncio.to_thread(env.shop)  # type: ignore[attr-defined]
    task = next(iter(env.tasks("test")))
    session = WebShopSession(shop, task, EpisodeContext(episode_id="fc", action_mode="tools"), env.prompts,  # type: ignore[attr-defined]
                             load_tool_texts(official_data_dir))
    browser = session._browser
    pages = [(browser.observation(), browser.available_actions())]
    steps: list[tuple[str, tuple[Any, ...]]] = []
    step_site = type(browser).step

    def recorded(self: Any, action: str) -> tuple[Any, ...]:
        score, done, info = step_site(self, action)
        steps.append((action, (self.observation(), self.available_actions(), score, done)))
        return score, done, info

    monkeypatch.setattr(type(browser), "step", recorded)
    replies = WEBSHOP_SCRIPTS[script](task.data["reference"])
    ours, outcome, _ = await _drive(session, replies, NOT_RUN)  # the calls FC leaves unanswered: webshop.tool_replies
    theirs, result = await asyncio.to_thread(_fc_webshop, official_data_dir, pages, list(steps), ScriptedSession([_assistant(r) for r in replies]))
    _same(ours, theirs)
    assert (outcome.status, result.status.__name__) == {"buy": ("completed", "COMPLETED"), "limit": ("task_limit_exceeded", "TASK_LIMIT_REACHED")}[script]
    assert result.result["reward"] == outcome.score and (script == "limit" or outcome.score == 1.0)


# --------------------------------------------------------------------------------------------------- os
def _fc_os(data_dir: Path, task: Task, outputs: list[str], session: ScriptedSession) -> tuple[list, Any]:
    """FC's OSInteraction._judge on ``task`` (its match rule; no init or start: our sandbox ran them), its container
    answering each command with the next of ``outputs``, our sandbox's output for the same command."""
    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/os_interaction/task.py"), "os_fc")
    answers = list(outputs)

    class Result:
        def __init__(self, output: str) -> None:
            self.output, self.exit_code = output.encode(), 0

    class Container:
        async def execute(self, command: str) -> Result:
            return Result(answers.pop(0))

    module.AgentCancelledException = type("AgentCancelledException", (Exception,), {})
    fc = object.__new__(module.OSInteraction)
    fc.round_limit = 8
    config = module.JudgeConfig()
    config.description, config.init_script, config.start, config.match, config.check = task.data["description"], None, None, task.data["match"], None
    return fc_requests(fc._judge, session, session, config, Container())


OS_SCRIPTS = {
    # no call; a command with a second call FC leaves unanswered; unreadable arguments; another function; the answer
    "answer": lambda answer: [
        ModelReply(content="I will look at the log first."),
        ModelReply(content="", tool_calls=[_call("b1", "bash_action", {"script": "echo hello; ls /root | head -3"}), _call("b2", "bash_action", {"script": "pwd"})]),
        ModelReply(content="", tool_calls=[_call("b3", "bash_action", "{not json")]),
        ModelReply(content="", tool_calls=[_call("b4", "python_action", {"code": "print(1)"})]),
        ModelReply(content="", tool_calls=[_call("b5", "bash_action", {"script": "true"})]),
        ModelReply(content="", tool_calls=[_call("b6", "answer_action", {"answer": answer})]),
    ],
    # finish_action commits its thought as the answer (FC's commit): a wrong one, graded as such
    "finish": lambda answer: [ModelReply(content="", tool_calls=[_call("f1", "finish_action", {"thought": "the task is done"})])],
}


async def _start_or_skip(env: Environment, unavailable: type[Exception]) -> None:
    """Start ``env``; what this machine lacks for it (bubblewrap, the root file system) is a skip, a failure with CI set."""
    try:
        await env.start()
    except unavailable as exc:
        require(False, str(exc))


@pytest.mark.parametrize("script", sorted(OS_SCRIPTS))
async def test_os_tools_mode_is_fcs_rendering_of_whole_episodes(official_data_dir: Path, script: str) -> None:
    from agentbench_async.envs import make_env
    from agentbench_async.envs.os_interaction import IGNORED
    from agentbench_async.errors import EnvUnavailableError

    env = make_env("os", data_dir=official_data_dir)
    await _start_or_skip(env, EnvUnavailableError)
    try:
        task = next(t for t in env.tasks("dev") if t.data.get("match") == {"answer": "1", "strip": True})
        replies = OS_SCRIPTS[script](task.data["match"]["answer"])
        session = await env.open_session(task, EpisodeContext(episode_id="fc", action_mode="tools"))
        try:
            ours, outcome, steps = await _drive(session, replies, IGNORED)  # what FC leaves unanswered: os.tool_replies
        finally:
            await session.close()
    finally:
        await env.close()
    shown = [s.observation[0]["content"] for s in steps if s.action and s.action.startswith("bash: ")]  # each command's output
    outputs = ["" if text == "The output of the OS is empty." else text.removeprefix("The output of the OS:\n\n") for text in shown]
    theirs, result = await asyncio.to_thread(_fc_os, official_data_dir, task, outputs, ScriptedSession([_assistant(r) for r in replies]))
    _same(ours, theirs)
    assert outcome is not None and outcome.status == "completed" and result.status.__name__ == "COMPLETED"
    assert (outcome.success, result.result["result"]) == ((True, True) if script == "answer" else (False, False))
