"""With ``--data-dir`` the first request of os, db, kg and ltp is upstream's own rendering of the same task, byte for
byte: upstream's task code (v0.2 for text mode, AgentBench FC for tools mode, the files ``agentbench data pull``
fetches) is run with stubs for its container/database/SPARQL clients (tests/upstream_render.py) up to its first
model call, and compared with what the environment sends; the tool definitions equal FC's task config. Without the
files the project's own wording runs and is named as a deviation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from upstream_render import FirstRequest, RecordingSession, first_request, load_upstream

from agentbench_async.envs import EpisodeContext, make_env
from agentbench_async.envs.db.protocol import first_messages as db_first_messages
from agentbench_async.envs.kg.prompts import first_messages as kg_first_messages
from agentbench_async.envs.kg.prompts import load_prompts as kg_load_prompts
from agentbench_async.envs.os_interaction.protocol import first_messages as os_first_messages
from agentbench_async.envs.upstream_prompts import FC, V02, upstream_path
from agentbench_async.errors import TaskFileError
from agentbench_async.testing import play


def _fc_tools(data_dir: Path, task: str) -> list[dict]:
    config = yaml.safe_load(upstream_path(data_dir, FC, f"configs/tasks/{task}.yaml").read_text(encoding="utf-8"))
    return config["default"]["parameters"]["tools"]


# --------------------------------------------------------------------------------------------------- os
def _os_upstream_text(data_dir: Path, description: str) -> list[dict]:
    module = load_upstream(upstream_path(data_dir, V02, "src/server/tasks/os_interaction/task.py"), "os_v02")
    task = object.__new__(module.OSInteraction)
    task.round_limit = 8
    config = module.JudgeConfig()
    config.description = description
    return first_request(task._judge, RecordingSession(), config, None)


def _os_upstream_tools(data_dir: Path, description: str) -> list[dict]:
    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/os_interaction/task.py"), "os_fc")
    session = RecordingSession()
    object.__new__(module.OSInteraction)._inject_initial_messages(session, description)
    return [{"role": m.role, "content": m.content} for m in session.history]


@pytest.mark.parametrize("mode", ["text", "tools"])
def test_os_first_request_is_upstreams_rendering_of_every_dev_task(official_data_dir: Path, mode: str) -> None:
    env = make_env("os", data_dir=official_data_dir)
    render = _os_upstream_text if mode == "text" else _os_upstream_tools
    tasks = list(env.tasks("dev"))
    assert tasks
    for task in tasks:
        ours = os_first_messages(task.data["description"], mode, env.prompts(mode))
        assert ours == render(official_data_dir, task.data["description"]), task.task_id
    if mode == "tools":
        assert env.prompts("tools").tools == _fc_tools(official_data_dir, "os")  # bash, finish (with thought), answer
        assert [t["function"]["name"] for t in env.prompts("tools").tools] == ["bash_action", "finish_action", "answer_action"]


def test_os_without_the_files_runs_its_own_wording_as_a_named_deviation(official_data_dir: Path, tmp_path: Path) -> None:
    env = make_env("os")
    own = os_first_messages("DESC", "text", env.prompts("text"))
    assert own != _os_upstream_text(official_data_dir, "DESC") and own[-1]["content"].endswith("My problem is:\n\nDESC")
    assert [d.setting for d in env.deviations(None, {}, "text")] == ["os.prompts"]
    assert [d.setting for d in env.deviations(None, {}, "tools")] == ["os.tools_prompt", "os.tools", "os.tool_replies"]
    assert env.deviations(str(official_data_dir), {}, "text") == []
    # tools mode with FC's wording: only the answers to the later calls of a message, which FC leaves unanswered (named)
    assert [d.setting for d in env.deviations(str(official_data_dir), {}, "tools")] == ["os.tool_replies"]
    # a data dir without the pulled sources: one line naming the file and data pull
    assert "upstream-prompts/v0.2/src/server/tasks/os_interaction/task.py" in env.missing_data(tmp_path, {}, "dev", "text")
    assert "upstream-prompts/fc/src/server/tasks/os_interaction/task.py" in env.missing_data(tmp_path, {}, "dev", "tools")
    assert env.missing_data(official_data_dir, {}, "dev", "text") is None
    with pytest.raises(TaskFileError, match=r"os_interaction/task.py not found .*agentbench data pull"):
        make_env("os", data_dir=tmp_path).prompts("text")


# --------------------------------------------------------------------------------------------------- db
class _NoDatabase:
    def execute(self, *args: object, **kwargs: object) -> str:
        return ""


def _db_upstream_text(data_dir: Path, record: dict) -> list[dict]:
    module = load_upstream(upstream_path(data_dir, V02, "src/server/tasks/dbbench/__init__.py"), "db_v02")
    task = object.__new__(module.DBBench)
    task.dataset, task.container, task.max_round = [(dict(record), None)], _NoDatabase(), 15
    return first_request(task.start_sample, 0, RecordingSession())


def test_db_first_request_is_upstreams_rendering_of_every_dev_task(official_data_dir: Path) -> None:
    env = make_env("db", data_dir=official_data_dir)
    tasks = list(env.tasks("dev"))
    assert tasks
    raw = [json.loads(line) for line in (official_data_dir / "dbbench" / "dev.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(raw) == len(tasks)
    for task, record in zip(tasks, raw):
        assert task.data["description"] == record["description"]
        assert db_first_messages(task.data, "text", env.prompts("text")) == _db_upstream_text(official_data_dir, record), task.task_id
    assert env.prompts("tools").tools == _fc_tools(official_data_dir, "dbbench")


def test_db_without_the_files_runs_its_own_wording_as_a_named_deviation(official_data_dir: Path, tmp_path: Path) -> None:
    env = make_env("db")
    record = {"description": "How many?", "add_description": "Table t.", "table": {"table_name": "t", "table_info": {"columns": [{"name": "a"}], "rows": [["1"]]}}}
    assert db_first_messages(record, "text", env.prompts("text")) != _db_upstream_text(official_data_dir, record)
    assert [d.setting for d in env.deviations(None, {}, "text")] == ["db.prompts"]
    assert env.deviations(str(official_data_dir), {}, "text") == []
    # tools mode reads FC's system text and notices from its dbbench/task.py (test_fc_tools_mode.py): only the grading of
    # committed answers (FC's result_processor.py is not in the pulled files) is named
    assert [d.setting for d in env.deviations(str(official_data_dir), {}, "tools")] == ["db.tool_grading"]
    assert [d.setting for d in env.deviations(None, {}, "tools")] == ["db.tools_prompt", "db.tools", "db.tool_grading"]
    (tmp_path / "dbbench").mkdir()
    (tmp_path / "dbbench" / "dev.jsonl").symlink_to(official_data_dir / "dbbench" / "dev.jsonl")  # AgentBench's data/ alone
    assert "upstream-prompts/v0.2/src/server/tasks/dbbench/__init__.py" in env.missing_data(tmp_path, {}, "dev", "text")
    assert env.missing_data(official_data_dir, {}, "dev", "text") is None


# --------------------------------------------------------------------------------------------------- kg
def _kg_upstream_text(data_dir: Path, item: dict) -> list[dict]:
    module = load_upstream(upstream_path(data_dir, V02, "src/server/tasks/knowledgegraph/task.py"), "kg_v02")
    task = object.__new__(module.KnowledgeGraph)
    task.inputs, task.round = [item], 15
    return first_request(task.start_sample, 0, RecordingSession())


def _kg_fc_rendering(data_dir: Path, item: dict) -> list[dict]:
    """FC's sync_start_sample for kg-std (one_shot true), from const.py: its task.py is not pulled, so its two
    lines of glue are spelled out here (578c5e9 src/server/tasks/knowledgegraph/task.py lines 85-93)."""
    const = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/knowledgegraph/const.py"), "kg_fc")
    rounds = yaml.safe_load(upstream_path(data_dir, FC, "configs/tasks/kg.yaml").read_text(encoding="utf-8"))["default"]["parameters"]["max_rounds"]
    user = {"role": "user", "content": f'{item["question"]}\nEntities: [{", ".join([entity for entity in item["entities"]])}]'}
    return [{"role": "system", "content": const.INSTRUCTIONS.format(max_round=rounds)}, *const.ONE_SHOT, user]


@pytest.mark.parametrize("mode", ["text", "tools"])
def test_kg_first_request_is_upstreams_rendering_of_every_dev_task(official_data_dir: Path, mode: str) -> None:
    env = make_env("kg", data_dir=official_data_dir)
    raw = json.loads((official_data_dir / "knowledgegraph" / "dev.json").read_text(encoding="utf-8"))
    tasks = list(env.tasks("dev"))
    assert len(tasks) == len(raw) > 0
    render = _kg_upstream_text if mode == "text" else _kg_fc_rendering
    for task, item in zip(tasks, raw):
        assert task.data["question"] == item["question"]
        ours = kg_first_messages(env.prompts(mode), task.data["question"], list(task.data["entities"]))
        assert ours == render(official_data_dir, item), task.task_id
    if mode == "tools":  # FC's seven definitions, as const.py holds them (kg.yaml defines none)
        assert env.prompts("tools").tools == load_upstream(upstream_path(official_data_dir, FC, "src/server/tasks/knowledgegraph/const.py"), "kg_fc").TOOLS


def test_kg_without_the_files_runs_its_own_wording_as_a_named_deviation(official_data_dir: Path) -> None:
    env = make_env("kg")
    item = {"question": "who?", "entities": {"A": "m.1"}}
    assert kg_first_messages(env.prompts("text"), "who?", ["A"]) != _kg_upstream_text(official_data_dir, item)
    assert [d.setting for d in env.deviations(None, {}, "text")] == ["kg.prompts"]
    assert [d.setting for d in env.deviations(None, {}, "tools")] == ["kg.tools_prompt", "kg.tools"]
    assert env.deviations(str(official_data_dir), {}, "text") == env.deviations(str(official_data_dir), {}, "tools") == []


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_kg_oracle_still_solves_tasks_behind_upstreams_one_shot(official_data_dir: Path, mode: str) -> None:
    """The mock's oracle finds the task after upstream's one-shot conversation (FC's has no "A new question:" lead)."""
    env = make_env("kg")  # the built-in graph and questions, with upstream's wording put in
    env._prompts[mode] = kg_load_prompts(official_data_dir, mode)
    await env.start()
    try:
        task = next(iter(env.tasks("dev")))
        record = await play(env, task, "oracle", action_mode=mode, history="agentbench")
    finally:
        await env.close()
    assert record.turns[0].content == env.prompts(mode).opening[0]["content"]
    assert record.outcome.status == "completed" and record.score == 1.0


# --------------------------------------------------------------------------------------------------- ltp
class _Reply:
    def __init__(self, status: object, content: str) -> None:
        self.status, self.content = status, content


class _PlayerAsks(RecordingSession):
    """The player: records the first request, then asks ``question``; the host's first request stops the game."""

    def __init__(self, module: object, question: str) -> None:
        super().__init__()
        self.module, self.question = module, question
        self.first: list[dict] | None = None

    async def action(self, *injection: object) -> _Reply:
        self.inject(list(injection))
        if self.first is None:
            self.first = [{"role": m.role, "content": m.content} for m in self.history]
        return _Reply(self.module.AgentOutputStatus.NORMAL, self.question)  # type: ignore[attr-defined]


class _Host:
    def inference(self, messages: list[dict]) -> str:
        raise FirstRequest([{"role": "assistant" if m["role"] == "agent" else m["role"], "content": m["content"]} for m in messages])


def _ltp_upstream(data_dir: Path, record: dict, question: str) -> tuple[list[dict], list[dict]]:
    """v0.2's start_sample on one puzzle: the player's first request and the host's first request (its 10-message
    primer and the question) after the player asks ``question``."""
    module = load_upstream(upstream_path(data_dir, V02, "src/server/tasks/ltp/task.py"), "ltp_v02")
    module.sentence_bleu = lambda *args, **kwargs: 0.0  # nltk is not installed here: no question repeats the story
    task = object.__new__(module.LateralThinkingPuzzle)
    task.inputs = [(record["story"], record["truth"], record["story_keys"], record["answer_keys"])]
    task.rounds, task.eval_agent = 25, _Host()
    player = _PlayerAsks(module, question)
    host = first_request(task.start_sample, 0, player)
    assert player.first is not None
    return player.first, host


def test_ltp_player_and_host_requests_are_upstreams_rendering_of_every_test_puzzle(official_data_dir: Path) -> None:
    from agentbench_async.envs.ltp.session import LTPSession

    env = make_env("ltp", data_dir=official_data_dir)
    tasks = list(env.tasks("test"))
    assert len(tasks) > 0
    question = "Did the man know the woman before?"
    for task in tasks:
        session = LTPSession(task, EpisodeContext(episode_id="t", action_mode="text"), None, env.prompter("en"), 25)  # type: ignore[arg-type]
        player, host = _ltp_upstream(official_data_dir, task.data, question)
        assert asyncio.run(session.begin()) == player, task.task_id
        assert session._answer_messages(question) == host, task.task_id


def test_ltp_host_requests_after_a_relevant_answer_are_upstreams(official_data_dir: Path) -> None:
    """The restatement, merge and comparison requests read from upstream's ENPrompter and ZHPrompter."""
    source = load_upstream(upstream_path(official_data_dir, V02, "src/server/tasks/ltp/task.py"), "ltp_v02")
    for language, cls in (("en", source.ENPrompter), ("zh", source.ZHPrompter)):
        ours = make_env("ltp", data_dir=official_data_dir, options={"language": language}).prompter(language)
        upstream = cls()
        assert f"{ours.restate_yes}\nQ?" == upstream.hosting_summary("Q?")
        assert f"{ours.restate_no}\nQ?" == upstream.hosting_summary_opposite("Q?")
        assert f"{ours.merge}\nA. B." == upstream.hosting_simplify(["A.", "B."])
        assert ours.compare.format(key="K", merged="M") == upstream.hosting_compare("K", "M")
        assert ours.invalid_hint == upstream.solver_hint_invalid() and ours.story_hint == upstream.solver_hint_appeared_in_story()


async def test_ltp_mock_judge_plays_upstreams_wording(official_data_dir: Path) -> None:
    """The mock's judge knows upstream's lead-ins: the oracle still solves an official puzzle (every key found)."""
    env = make_env("ltp", data_dir=official_data_dir)
    task = next(iter(env.tasks("test")))
    record = await play(env, task, "oracle")
    assert record.turns[0].content == env.prompter("en").player_intro.format(story=task.data["story"])
    assert record.score == 1.0, record.details


def test_ltp_without_the_file_runs_its_own_wording_as_a_named_deviation(official_data_dir: Path, tmp_path: Path) -> None:
    env = make_env("ltp")
    assert [d.setting for d in env.deviations(None, {}, "text")] == ["ltp.prompts"]
    assert env.deviations(str(official_data_dir), {}, "text") == []
    assert env.prompter("en").player_intro != make_env("ltp", data_dir=official_data_dir).prompter("en").player_intro
    (tmp_path / "lateralthinkingpuzzle").symlink_to(official_data_dir / "lateralthinkingpuzzle")
    assert "upstream-prompts/v0.2/src/server/tasks/ltp/task.py" in env.missing_data(tmp_path, {}, "test", "text")


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_os_episode_in_upstreams_wording_stores_upstreams_opening_and_the_oracle_solves_it(official_data_dir: Path, mode: str) -> None:
    """A whole official os episode (the sandbox): the stored opening is upstream's rendering, the tools sent are FC's,
    and the mock's oracle still solves the task behind upstream's one-shot or FC's system text."""
    from agentbench_async.errors import EnvUnavailableError
    from support import require

    env = make_env("os", data_dir=official_data_dir)
    try:
        await env.start()
    except EnvUnavailableError as exc:
        require(False, str(exc))
    try:
        task = next(t for t in env.tasks("dev") if "match" in t.data)  # an answer checked by the engine alone
        record = await play(env, task, "oracle", action_mode=mode, history="agentbench")
    finally:
        await env.close()
    render = _os_upstream_text if mode == "text" else _os_upstream_tools
    opening = [{"role": r.role, "content": r.content} for r in record.turns if r.turn == 0]
    assert opening == await asyncio.to_thread(render, official_data_dir, task.data["description"])  # upstream's code runs its own loop
    assert record.outcome.status == "completed" and record.score == 1.0, record.outcome


def test_ltp_chinese_puzzles_get_upstreams_english_wording_by_default(official_data_dir: Path) -> None:
    """v0.2's start_sample uses ENPrompter for every puzzle set (``prompter = ENPrompter()  # TODO: change this``): the
    Chinese puzzles' first requests are its English rendering, unless the option asks for ZHPrompter (a deviation)."""
    from agentbench_async.envs.ltp.session import LTPSession
    from agentbench_async.settings import deviations

    env = make_env("ltp", data_dir=official_data_dir, options={"language": "zh"})
    tasks = list(env.tasks("test"))
    assert tasks and all(t.data["prompter"] == "en" for t in tasks)
    question = "他以前认识那个女人吗？"
    for task in tasks:
        session = LTPSession(task, EpisodeContext(episode_id="t", action_mode="text"), None, env.prompter(task.data["prompter"]), 25)  # type: ignore[arg-type]
        player, host = _ltp_upstream(official_data_dir, task.data, question)
        assert asyncio.run(session.begin()) == player, task.task_id
        assert session._answer_messages(question) == host, task.task_id
    chinese = make_env("ltp", data_dir=official_data_dir, options={"language": "zh", "prompter": "zh"})
    task = next(iter(chinese.tasks("test")))
    upstream = load_upstream(upstream_path(official_data_dir, V02, "src/server/tasks/ltp/task.py"), "ltp_v02").ZHPrompter()
    assert chinese.prompter(task.data["prompter"]).player_intro.format(story=task.data["story"]) == upstream.solver_instruction(task.data["story"])
    config = {"envs": ["ltp"], "data_dir": str(official_data_dir), "env_options": {"ltp": {"language": "zh", "prompter": "zh"}}}
    assert [d.line() for d in deviations(config) if d.setting == "ltp.prompter"] == ["ltp.prompter: zh — not comparable to the paper (AgentBench v0.2: en)"]
    config["env_options"] = {"ltp": {"language": "zh"}}
    assert not [d for d in deviations(config) if d.setting == "ltp.prompter"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_ltp_invalid_questions_and_yes_no_answers_are_upstreams_tests(official_data_dir: Path, language: str) -> None:
    """The phrases that make a question invalid and the beginnings of a yes/no answer are read from check_solver_valid,
    check_yes and check_no: the same verdicts as upstream's methods (ZHPrompter's are 感谢/谢谢/再见 and 是, 不是/否)."""
    module = load_upstream(upstream_path(official_data_dir, V02, "src/server/tasks/ltp/task.py"), "ltp_v02")
    upstream = (module.ENPrompter if language == "en" else module.ZHPrompter)()
    ours = make_env("ltp", data_dir=official_data_dir).prompter(language)
    questions = ["Can we play a new game?", "Great job!", "Was he alone?", "Any further question?", "谢谢你", "再见", "我们换个游戏吧",
                 "新游戏", "他是医生吗？", "感谢"]  # fmt: skip
    for q in questions:
        assert (not any(phrase in q for phrase in ours.invalid_phrases)) == upstream.check_solver_valid(q), q
    for answer in ["Yes.", "yes", "No.", "no", "Irrelevant.", "是。", "不是。", "否", "无关", "  Yes", "YES"]:
        assert answer.strip().startswith(ours.yes_prefixes) == upstream.check_yes(answer), answer
        assert answer.strip().startswith(ours.no_prefixes) == upstream.check_no(answer), answer
    if language == "zh":
        assert ours.invalid_phrases == ("感谢", "谢谢", "再见") and ours.yes_prefixes == ("是",)


def test_ltp_a_changed_validity_check_is_named(official_data_dir: Path, tmp_path: Path) -> None:
    from agentbench_async.envs.ltp.prompts import load_prompter

    source = upstream_path(official_data_dir, V02, "src/server/tasks/ltp/task.py").read_text(encoding="utf-8")
    copy = upstream_path(tmp_path, V02, "src/server/tasks/ltp/task.py")
    copy.parent.mkdir(parents=True)
    copy.write_text(source.replace('return not ("感谢" in solver', 'return ("感谢" in solver'), encoding="utf-8")
    assert load_prompter(tmp_path, "en").invalid_phrases[0] == "new story"
    with pytest.raises(TaskFileError, match="ZHPrompter.check_solver_valid"):
        load_prompter(tmp_path, "zh")


async def test_ltp_mock_oracle_solves_a_chinese_puzzle_in_upstreams_english_wording(official_data_dir: Path) -> None:
    env = make_env("ltp", data_dir=official_data_dir, options={"language": "zh"})
    task = next(iter(env.tasks("test")))
    record = await play(env, task, "oracle")
    assert record.turns[0].content.startswith("You are a game player") and task.data["story"] in record.turns[0].content
    assert record.score == 1.0 and record.details["language"] == "zh" and record.details["prompter"] == "en", record.details


@pytest.mark.parametrize("env_name, fc_tools", [
    ("os", lambda d: _fc_tools(d, "os")),
    ("db", lambda d: _fc_tools(d, "dbbench")),
    ("kg", lambda d: load_upstream(upstream_path(d, FC, "src/server/tasks/knowledgegraph/const.py"), "kg_fc_wire").TOOLS),
])  # fmt: skip
def test_fc_tool_definitions_are_byte_equal_on_the_wire(official_data_dir: Path, env_name: str, fc_tools: object) -> None:
    """The ``tools`` of a tools-mode request body, as the engine serialises it, are FC's definitions serialised the
    same way: the same names, descriptions, parameters, key order and list order (a dict comparison ignores order)."""
    from agentbench_async.models.wire import dumps_body

    env = make_env(env_name, data_dir=str(official_data_dir))
    sent = dumps_body({"tools": env.prompts("tools").tools})
    assert sent == dumps_body({"tools": fc_tools(official_data_dir)})  # type: ignore[operator]
    assert b'"additionalProperties":false' in sent or env_name == "kg"  # FC's os/db definitions carry it
