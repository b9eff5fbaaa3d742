"""kg: the built-in suite end to end (embedded pyoxigraph), the protocol's parsing and error messages,
hostile replies, the official loader and the built-in generator."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from agentbench_async.envs import EpisodeContext, make_env
from agentbench_async.envs.kg import KGEnvironment
from agentbench_async.envs.kg.metric import f1
from agentbench_async.envs.kg.tasks import builtin_dir
from agentbench_async.errors import EnvUnavailableError, TaskFileError
from agentbench_async.testing import play
from agentbench_async.types import ModelReply, ToolCall
from support import load_generator

ALL_TOOLS = {"get_relations", "get_neighbors", "intersection", "get_attributes", "argmax", "argmin", "count"}


@pytest.fixture
async def env():
    environment = make_env("kg")
    await environment.start()
    yield environment
    await environment.close()


def _task(env: KGEnvironment, fragment: str):
    """The built-in question whose text contains ``fragment`` (either split)."""
    return next(t for split in ("dev", "test") for t in env.tasks(split) if fragment in t.data["question"])


async def _session(env: KGEnvironment, task, mode: str = "text"):
    session = await env.open_session(task, EpisodeContext(episode_id="t", action_mode=mode))  # type: ignore[arg-type]
    await session.begin()
    return session


def _say(text: str) -> ModelReply:
    return ModelReply(content=text)


def test_builtin_suite_sizes_and_coverage() -> None:
    env = make_env("kg")
    for split, minimum in (("dev", 20), ("test", 50)):
        tasks = list(env.tasks(split))
        assert len(tasks) >= minimum
        used = collections.Counter(a.split("(")[0] for t in tasks for a in t.data["actions"])
        assert set(used) == ALL_TOOLS, f"{split} must exercise every tool"
        assert all(t.data["gold"] for t in tasks)
    assert env.count("dev") == 30 and env.count("test") == 80


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_oracle_scores_100_percent_on_builtin_suites(env: KGEnvironment, mode: str) -> None:
    for split in ("dev", "test"):
        for task in env.tasks(split):
            record = await play(env, task, "oracle", action_mode=mode)
            assert (record.status, record.score) == ("completed", 1.0), (task.data["question"], record.error, record.details)
            assert record.details["em"] is True and record.details["executable"] is True
            assert sorted(record.details["predicted"]) == task.data["gold"]


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_weak_policy_reaches_every_status(env: KGEnvironment, mode: str) -> None:
    statuses = collections.Counter()
    scores = []
    errors: set[str | None] = set()
    for split in ("dev", "test"):
        for task in env.tasks(split):
            record = await play(env, task, "weak", action_mode=mode)
            statuses[record.status] += 1
            scores.append(record.score)
            errors.update(row.error for row in record.turns if row.valid is False)
            if record.status == "task_limit_exceeded":
                assert record.n_turns == 15 and record.details["executable"] is False
    # kg never ends an episode on a malformed reply (AgentBench lets the model retry), so these are all
    # the agent-caused statuses it can emit; env_error comes from a failing backend (test_kg_virtuoso). In tools mode
    # (FC) a final answer naming no variable ends the sample as AGENT_VALIDATION_FAILED (invalid_format).
    assert set(statuses) == {"completed", "task_limit_exceeded", "context_limit_exceeded"} | ({"invalid_format"} if mode == "tools" else set())
    assert sum(scores) / len(scores) < 0.3
    # unexecutable replies are stored per turn (valid = false, with the reason) for the failure drill-down
    assert None not in errors and len(errors) >= 5


async def test_tool_observations_follow_the_protocol(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task)
    step = await s.step(_say("Thought: start.\nAction: get_relations(Ilse Varga)"))
    text = step.observation[0]["content"]
    assert text.startswith("Observation: [") and "film.director.film" in text
    assert "type.object" not in text and text == "Observation: [" + ", ".join(sorted(text[14:-1].split(", "))) + "]"
    step = await s.step(_say("Action: get_neighbors(Ilse Varga, film.director.film)"))
    assert step.observation[0]["content"] == "Observation: variable #0, which are instances of film.film"
    # get_neighbors only with a relation listed for exactly this variable
    step = await s.step(_say("Action: get_neighbors(Thriller, film.film_genre.films_in_this_genre)"))
    assert not step.valid and "cannot be executed" in step.observation[0]["content"]
    await s.step(_say("Action: get_relations(Thriller)"))
    step = await s.step(_say("Action: get_neighbors(Thriller, film.film_genre.films_in_this_genre)"))
    assert step.observation[0]["content"].startswith("Observation: variable #1")
    step = await s.step(_say("Action: intersection(#0, #1)"))
    assert step.observation[0]["content"] == "Observation: variable #2, which are instances of film.film"
    step = await s.step(_say("Action: count(#2)"))
    assert step.observation[0]["content"] == "Observation: variable #3, which is a number"
    step = await s.step(_say("Thought: done.\nFinal Answer: #2\nObservation: something the model made up"))
    assert step.outcome is not None and step.outcome.status == "completed" and step.outcome.score == 1.0
    assert step.outcome.details["actions"][0] == "get_relations(Ilse Varga)"


async def test_count_and_superlatives_run_as_sparql(env: KGEnvironment) -> None:
    task = _task(env, "lowest mountain of the greyspine range")  # two mountains tie at the minimum
    assert len(task.data["gold"]) == 2
    record = await play(env, task, "oracle")
    assert record.score == 1.0 and len(record.details["predicted"]) == 2
    task = _task(env, "how many films has leon castell directed")
    record = await play(env, task, "oracle")
    assert record.details["predicted"] == ["3"] and record.score == 1.0
    # argmax nested inside a later hop
    task = next(t for t in env.tasks("dev") if t.data["source"] == "builtin:superlative_combined")
    assert (await play(env, task, "oracle")).score == 1.0


async def test_error_messages_match_agentbench(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task)
    cases = [
        ("I am thinking.", "No executable function found! Need to recheck the action."),
        ("Action: hmm", "Function is not executed!"),
        ("Action: get_relations()", "I may make a syntax error when calling get_relations (e.g., unmatched parenthesis). I need to fix it and reuse the tool"),
        ("Final Answer: #3", "Invalid variable id! Need to recheck the action."),
        ("Action: get_attributes(Ilse Varga)", "get_attributes(Ilse Varga) cannot be executed. You may make a mistake and need to fix it."),
        ("Action: intersection(#0, #1)", "intersection(#0, #1) cannot be executed. The two variables are not of the same type. You may further explore them by call get_relations"),
        ("Action: union(#0, #1)", "union(#0, #1) cannot be executed. You may make a mistake and need to fix it."),
    ]
    for reply, expected in cases:
        step = await s.step(_say(reply))
        assert step.outcome is None and not step.valid
        assert step.observation == [{"role": "user", "content": expected}], reply
    # type mismatch: a film set and a person set
    await s.step(_say("Action: get_relations(Ilse Varga)"))
    await s.step(_say("Action: get_neighbors(Ilse Varga, film.director.film)"))
    await s.step(_say("Action: get_relations(Ilse Varga)"))
    await s.step(_say("Action: get_neighbors(Ilse Varga, people.person.place_of_birth)"))
    step = await s.step(_say("Action: intersection(#0, #1)"))
    assert "not of the same type" in step.observation[0]["content"]


async def test_entity_names_with_commas_and_parentheses(env: KGEnvironment) -> None:
    task = _task(env, "salt, smoke and silver")
    s = await _session(env, task)
    step = await s.step(_say("Action: get_relations(Salt, Smoke and Silver)"))
    assert step.valid and "film.film.starring" in step.observation[0]["content"]
    step = await s.step(_say("Action: get_neighbors(Salt, Smoke and Silver, film.film.starring)"))
    assert step.observation[0]["content"].startswith("Observation: variable #0")
    task = _task(env, "echoes (director's cut)")
    s = await _session(env, task)
    step = await s.step(_say("Action: get_relations(Echoes (Director's Cut))"))
    assert step.valid and "film.film.starring" in step.observation[0]["content"]


async def test_hostile_replies_stay_inside_the_episode(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task)
    hostile = [
        "Action: get_relations(m.0x> ?p ?o } ; DROP ALL ; SELECT * { <x)",
        "Action: get_relations(<http://example.com/secret>)",
        "Action: get_neighbors(Ilse Varga, film.director.film> . ?s ?p ?o)",
        "Action: final_execute(#0)",
        "Action: __import__(os)",
        "Action: get_relations(#-1)",
        "Action: get_relations(#999999999999999999999)",
        "Action: " + "get_relations(" * 5000,
        "\x00\ud800 Final Answer: #x",
    ]
    for reply in hostile:
        step = await s.step(_say(reply))
        assert step.outcome is None and not step.valid
    assert s.variables == []  # nothing executed
    step = await s.step(_say("Action: get_relations(Ilse Varga)"))
    assert step.valid  # the store is intact
    tools = await _session(env, task, "tools")
    for arguments in ['{"variable": "m.0abc\\n"}', '{"variable": "m.0a> ?p ?o } #"}', '{"variable": ["#0"]}', "[1, 2]", '{"variable": "#0", "x": 1}']:
        step = await tools.step(ModelReply(content="", tool_calls=[ToolCall(id="h", name="get_relations", arguments=arguments)]))
        assert step.outcome is None and not step.valid, arguments
        texts = tools._prompts.texts  # FC's answers: its API's refusal, or the error of the failed call
        content = step.observation[0]["content"]
        assert step.observation[0]["role"] == "tool" and (content == texts.refusals["get_relations"] or content.startswith(texts.error[:-3]))
    assert tools.variables == []


async def test_tools_mode_errors_answer_every_call(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task, "tools")
    assert s.tools() and {t["function"]["name"] for t in s.tools()} == ALL_TOOLS
    reply = ModelReply(
        content="",
        tool_calls=[
            ToolCall(id="a", name="get_relations", arguments='{"variable": "Ilse Varga"}'),
            ToolCall(id="b", name="get_relations", arguments='{"variable": "Thriller"}'),
        ],
    )
    step = await s.step(reply)  # FC runs every call of a message, in order
    assert [m["tool_call_id"] for m in step.observation] == ["a", "b"]
    assert all(m["content"].startswith("Observation: [") for m in step.observation) and step.valid
    texts = s._prompts.texts
    step = await s.step(ModelReply(content="", tool_calls=[ToolCall(id="c", name="get_neighbors", arguments="{not json"),
                                                           ToolCall(id="d", name="final_execute", arguments='{"variable": "#0"}'),
                                                           ToolCall(id="e", name="get_neighbors", arguments='{"variable": "#0"}')]))
    assert not step.valid and step.observation[0]["content"].startswith(texts.error[:-3])
    assert [m["content"] for m in step.observation[1:]] == [texts.no_function.format(function_name="final_execute"),
                                                            texts.arguments.format(function_name="get_neighbors")]
    step = await s.step(ModelReply(content="no idea"))
    assert step.observation == [{"role": "user", "content": texts.no_call}]
    step = await s.step(ModelReply(content="Final Answer: #3"))  # FC: no such variable ends the sample, validation failed
    assert step.outcome is not None and (step.outcome.status, step.outcome.paper_status) == ("invalid_format", "agent validation failed")


async def test_turn_limit_outcome(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task)
    outcome = await s.on_turn_limit()
    assert outcome.status == "task_limit_exceeded" and outcome.score == 0.0
    assert outcome.details["executable"] is False and outcome.details["predicted"] == []


def test_metric_matches_agentbench() -> None:
    assert f1([], ["a"]) == 0.0
    assert f1(["a", "b"], ["a"]) == pytest.approx(2 / 3)
    assert f1(["3"], ["3"]) == 1.0


def test_official_files_load_with_counts(official_data_dir: Path) -> None:
    env = make_env("kg", data_dir=official_data_dir)
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert (len(dev), len(test)) == (20, 150)
    assert all(t.source == "official" for t in dev + test)
    sources = collections.Counter(t.data["qid"].rsplit("_", 1)[1] for t in test)
    assert sources == {"grailqa": 91, "cwq": 41, "graphquestions": 17, "webqsp": 1}
    assert sum(1 for t in test if t.data["gold"][0].isdigit() and any(a.startswith("count") for a in t.data["actions"])) == 31
    assert make_env("kg", data_dir=official_data_dir / "knowledgegraph").count("test") == 150


async def test_official_without_endpoint_is_reported_not_crashed(official_data_dir: Path) -> None:
    env = make_env("kg", data_dir=official_data_dir)
    with pytest.raises(EnvUnavailableError, match="--kg-endpoint"):
        await env.start()


async def test_official_ontology_loads_from_data_dir(official_data_dir: Path, tmp_path: Path) -> None:
    # The official ontology drives the tools when the official data is used (here with a tiny graph).
    graph = tmp_path / "g.nt"
    ns = "http://rdf.freebase.com/ns/"
    graph.write_text(
        f"<{ns}m.0a> <{ns}film.director.film> <{ns}m.0b> .\n<{ns}m.0a> <{ns}not.in.vocab> <{ns}m.0c> .\n", encoding="utf-8"
    )
    env = make_env("kg", data_dir=official_data_dir, options={"kg_graph": str(graph)})
    await env.start()
    try:
        task = next(env.tasks("dev"))
        s = await _session(env, task)
        step = await s.step(_say("Action: get_relations(m.0a)"))
        assert step.observation[0]["content"] == "Observation: [film.director.film]"
        step = await s.step(_say("Action: get_neighbors(m.0a, film.director.film)"))
        assert step.observation[0]["content"] == "Observation: variable #0, which are instances of film.film"
    finally:
        await env.close()


def test_bad_task_file_is_one_clear_line(tmp_path: Path) -> None:
    folder = tmp_path / "knowledgegraph"
    folder.mkdir()
    (folder / "dev.json").write_text(json.dumps([{"question": "q", "entities": {"x": "m.0x"}, "answer": [{"answer_argument": "m.0y"}]}, {"question": 3}]))
    env = make_env("kg", data_dir=tmp_path)
    with pytest.raises(TaskFileError, match=r"dev.json: record 1: 'question' must be a string"):
        list(env.tasks("dev"))
    with pytest.raises(TaskFileError, match="std.json: not found"):
        list(env.tasks("test"))


def test_generator_reproduces_committed_suite(tmp_path: Path) -> None:
    load_generator("kg").generate(tmp_path)
    for name in ("graph.nt", "dev.json", "test.json", "ontology/vocab.json", "ontology/fb_roles", "ontology/reverse_properties"):
        assert (tmp_path / name).read_bytes() == (builtin_dir() / name).read_bytes(), f"{name} differs: re-run environments/kg/generate.py"


async def test_statuses_map_to_what_upstream_records(env: KGEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench_async.envs.kg.backends import QueryFailed

    task = _task(env, "which thriller films did ilse varga direct")
    record = await play(env, task, "oracle")
    assert (record.status, record.paper_status) == ("completed", "completed")
    s = await _session(env, task)
    assert (await s.on_turn_limit()).paper_status == "task limit reached"
    overflow = await s.on_context_limit("prompt too long")  # upstream: AGENT_CONTEXT_LIMIT, no result
    assert (overflow.status, overflow.score) == ("context_limit_exceeded", 0.0)
    # the final query failing at the endpoint: our completed with score 0, upstream's framework TASK_ERROR
    entity = next(iter(task.data["entities"]))
    step = await s.step(_say(f"Action: get_relations({entity})"))
    relation = step.observation[0]["content"].removeprefix("Observation: [").split(",")[0].rstrip("]")
    step = await s.step(_say(f"Action: get_neighbors({entity}, {relation})"))
    assert "variable #0" in step.observation[0]["content"]

    async def refuse(variable: object) -> list[str]:
        raise QueryFailed("HTTP 500: query timed out")

    monkeypatch.setattr(s._toolbox, "final_answer", refuse)
    step = await s.step(_say("Final Answer: #0"))
    assert step.outcome is not None
    assert (step.outcome.status, step.outcome.score, step.outcome.paper_status) == ("completed", 0.0, "task error")


async def test_instructions_leave_the_reply_format_to_the_example(env: KGEnvironment) -> None:
    """Upstream's instructions never state the 'Action: <call>' format; only the one-shot example shows it."""
    messages = await (await _session(env, _task(env, "which thriller films did ilse varga direct"))).begin()
    assert "Action:" not in messages[0]["content"] and "Thought:" not in messages[0]["content"]
    assert "Final Answer: #3" in messages[0]["content"]  # stated upstream too
    assert messages[3]["content"].startswith("Thought: ") and "\nAction: get_relations(Gas-generator cycle)" in messages[3]["content"]


async def test_cleaned_reply_replaces_the_reply_in_the_history(env: KGEnvironment) -> None:
    task = _task(env, "which thriller films did ilse varga direct")
    s = await _session(env, task)
    entity = next(iter(task.data["entities"]))
    step = await s.step(_say(f"Thought: look\\_around.\nAction: get_relations({entity})\nObservation: [made.up]"))
    assert step.history_reply == f"Thought: look_around.\nAction: get_relations({entity})\n"  # what later turns show
    assert "made.up" not in step.observation[0]["content"]
