"""Lateral Thinking Puzzles (ltp): data, game rules, metrics and the mock policies."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from agentbench_async.environment import stable_choice
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.ltp import LTPEnvironment
from agentbench_async.envs.ltp.bleu import char_unigram_bleu
from agentbench_async.envs.ltp.data import key_lines, load_official, strip_bullet
from agentbench_async.envs.ltp.policies import WEAK_MODES
from agentbench_async.errors import ConfigError, TaskFileError
from agentbench_async.testing import play
from agentbench_async.types import Message, ModelReply

# -- character BLEU ----------------------------------------------------------------------------------


def test_bleu_is_brevity_penalty_times_clipped_char_precision() -> None:
    assert char_unigram_bleu("abc", "abc") == 1.0
    # shorter hypothesis: BP = exp(1 - 4/2), precision 1
    assert char_unigram_bleu("abcd", "ab") == pytest.approx(math.exp(-1))
    # longer hypothesis: BP = 1; "aab" against "ab": clipped matches a:1, b:1 of 3 characters
    assert char_unigram_bleu("ab", "aabx") == pytest.approx(2 / 4)
    assert char_unigram_bleu("abc", "") == 0.0
    assert char_unigram_bleu("abc", "xyz") == 0.0
    # spaces and punctuation are characters too
    assert char_unigram_bleu("a b.", "a b.") == 1.0


def test_bleu_flags_a_near_copy_of_a_story_key_but_not_a_short_question() -> None:
    key = "A man pushed his car to a hotel."
    assert char_unigram_bleu(key, "A man pushed his car to the hotel.") > 0.85
    assert char_unigram_bleu(key, "Is it a game.") < 0.2


# -- keys ----------------------------------------------------------------------------------------------


def test_bullets_are_stripped_and_blank_lines_do_not_count() -> None:
    assert strip_bullet("1. He was short.") == "He was short."
    assert strip_bullet("12. He was short.") == "He was short."
    assert strip_bullet("- He was short.") == "He was short."
    assert strip_bullet("He was short.") == "He was short."
    assert strip_bullet("1.女人去图书馆借书。") == "女人去图书馆借书。"  # fix: upstream made this ""
    assert key_lines("1. a key\n\n2. another key\n") == ["a key", "another key"]


# -- official data -------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_official_dev_and_standard_load_with_the_readme_counts(official_data_dir: Path, language: str) -> None:
    env = LTPEnvironment(data_dir=official_data_dir, options={"language": language})
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert (len(dev), len(test)) == (20, 50)
    assert [t.task_id for t in dev] == [str(i) for i in range(20)]  # sample index = row index
    for task in dev + test:
        assert task.source == "official"
        assert task.data["story"] and task.data["truth"]
        assert 2 <= len(key_lines(task.data["answer_keys"])) <= 11
    assert env.count("test") == 50


def test_blank_lines_between_keys_do_not_inflate_the_key_count(official_data_dir: Path) -> None:
    env = LTPEnvironment(data_dir=official_data_dir)
    row27 = env.get_task("test", "27")
    assert len(row27.data["answer_keys"].split("\n")) == 11  # what upstream used as the denominator
    assert len(key_lines(row27.data["answer_keys"])) == 6


def test_loader_reads_the_xlsx_only(official_data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "lateralthinkingpuzzle"
    folder.mkdir()
    for name in ("dev.xlsx", "standard.xlsx"):
        shutil.copy(official_data_dir / "lateralthinkingpuzzle" / name, folder / name)
    env = LTPEnvironment(data_dir=tmp_path)
    assert env.count("dev") == 20 and env.count("test") == 50


def test_a_bad_workbook_names_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "dev.xlsx"
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["story", "answer", "Story keys", "Answer keys"])
    ws.append(["A story.", "A truth.", "1. a story key", "1. an answer key"])
    ws.append(["Another story.", None, "1. a story key", "1. an answer key"])
    wb.save(path)
    with pytest.raises(TaskFileError, match=r"row 3: column 'truth' is empty"):
        load_official(path)
    with pytest.raises(TaskFileError, match="not found"):
        load_official(tmp_path / "missing.xlsx")


def test_missing_official_folder_is_a_clear_error(tmp_path: Path) -> None:
    env = LTPEnvironment(data_dir=tmp_path, options={"language": "zh"})
    with pytest.raises(TaskFileError, match="lateralthinkingpuzzle_zh"):
        list(env.tasks("dev"))


# -- built-in suites -----------------------------------------------------------------------------------


def test_builtin_suites_have_20_dev_and_50_test_puzzles() -> None:
    env = make_env("ltp")
    for split, n in (("dev", 20), ("test", 50)):
        tasks = list(env.tasks(split))
        assert len(tasks) == n
        assert len({t.task_id for t in tasks}) == n
        assert all(t.source == "builtin" and len(key_lines(t.data["answer_keys"])) >= 2 for t in tasks)
        assert all(key_lines(t.data["story_keys"]) for t in tasks)


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="language"):
        LTPEnvironment(options={"language": "fr"})
    with pytest.raises(ConfigError, match="rounds"):
        LTPEnvironment(options={"rounds": 0})
    assert LTPEnvironment(options={"rounds": "7"}).max_turns == 7  # CLI options arrive as strings
    with pytest.raises(ConfigError, match="--data-dir"):
        list(LTPEnvironment(options={"language": "zh"}).tasks("dev"))  # the built-in puzzles are English


# -- oracle and weak through the real episode loop -------------------------------------------------------


async def _play_all(env: LTPEnvironment, split: str, policy: str) -> list[Any]:
    return [await play(env, task, policy) for task in env.tasks(split)]


@pytest.mark.parametrize("split", ["dev", "test"])
async def test_oracle_uncovers_every_key_of_the_builtin_puzzles(split: str) -> None:
    env = LTPEnvironment()
    for record in await _play_all(env, split, "oracle"):
        assert record.status == "task_limit_exceeded"  # the game always runs its 25 rounds
        assert record.score == 1.0 and record.success
        assert record.n_turns == 25
        d = record.details
        assert d["finished"] and d["progress"] == 1.0 and d["bingo"] == d["hints"]
        assert d["finish_round"] == d["hints"] and d["efficiency"] == pytest.approx(1 - d["hints"] / 25)


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_oracle_uncovers_every_key_of_the_official_puzzles(official_data_dir: Path, language: str) -> None:
    env = LTPEnvironment(data_dir=official_data_dir, options={"language": language})
    for split in ("dev", "test"):
        records = await _play_all(env, split, "oracle")
        assert [r.score for r in records] == [1.0] * len(records), [r.task_id for r in records if r.score < 1]


async def test_weak_reaches_every_status_ltp_can_end_with() -> None:
    env = LTPEnvironment()
    records = await _play_all(env, "test", "weak")
    statuses = Counter(r.status for r in records)
    assert set(statuses) == {"completed", "context_limit_exceeded", "task_limit_exceeded"}
    for record in records:
        mode = WEAK_MODES[stable_choice(record.task_id, len(WEAK_MODES))]
        if mode == "abort":  # the third invalid question ends the game
            assert (record.status, record.n_turns, record.details["abort"]) == ("completed", 3, 6)
            assert "invalid" in (record.error or "")
        elif mode == "empty":
            assert (record.status, record.n_turns, record.score) == ("completed", 2, 0.0)
        elif mode == "off_topic":
            assert (record.status, record.score, record.details["relevant"]) == ("task_limit_exceeded", 0.0, 0)
        elif mode == "partial":
            assert record.status == "task_limit_exceeded" and 0 < record.score < 1
        else:  # a context overflow after the first key: the progress so far is kept, as upstream
            assert (record.status, record.n_turns, record.details["bingo"]) == ("context_limit_exceeded", 1, 1)
            assert record.score == pytest.approx(1 / record.details["hints"]) and record.score > 0
        assert record.paper_status == {"completed": "completed", "task_limit_exceeded": "task limit reached",
                                       "context_limit_exceeded": "agent context limit"}[record.status]
    assert 0 < sum(r.score for r in records) / len(records) < 0.5


async def test_without_a_judge_the_episode_is_an_env_error_naming_the_flag() -> None:
    env = LTPEnvironment()
    task = next(env.tasks("dev"))
    record = await play(env, task, "oracle", judge_policy=None)
    assert record.status == "env_error" and "--judge-model" in (record.error or "")


async def test_tools_mode_is_refused() -> None:
    env = LTPEnvironment()
    assert env.supports_tools is False
    with pytest.raises(ConfigError, match="no tools mode"):
        await env.open_session(next(env.tasks("dev")), EpisodeContext(episode_id="x", action_mode="tools"))


# -- the rules, with a scripted judge ---------------------------------------------------------------------

_TASK = Task(
    env="ltp",
    split="dev",
    task_id="t",
    data={
        "story": "A man pushed his car to a hotel and said he was bankrupt.",
        "truth": "He was playing Monopoly.",
        "story_keys": "1. A man pushed his car to a hotel.\n2. He said he was bankrupt.",
        "answer_keys": "1. They were playing a board game.\n\n2. The car is a game token.",
        "language": "en",
    },
)


class _ScriptedJudge:
    """Answers by request type; records every request."""

    def __init__(self, answer: str = "Yes.", compare: str = "Yes") -> None:
        self.answer = answer
        self.compare = compare
        self.calls: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> ModelReply:
        self.calls.append(messages)
        first = messages[0]["content"]
        if len(messages) > 1:
            return ModelReply(content="  " + self.answer + "  ")
        if first.startswith("Compare"):
            return ModelReply(content=self.compare)
        return ModelReply(content="FACT:" + first.partition("\n")[2])

    def kinds(self) -> list[str]:
        """The request types in order: answer, restate, opposite, merge, compare."""
        out = []
        for messages in self.calls:
            head = messages[0]["content"].split("\n")[0]
            if len(messages) > 1:
                out.append("answer")
            elif head.startswith("Rewrite"):
                out.append("opposite" if "opposite" in head else "restate")
            else:
                out.append({"Simplify": "merge", "Compare": "compare"}[head.split()[0]])
        return out


async def _session(judge: _ScriptedJudge, rounds: int = 25):  # type: ignore[no-untyped-def]
    env = LTPEnvironment(options={"rounds": rounds})
    session = await env.open_session(_TASK, EpisodeContext(episode_id="e", judge=judge))
    first = await session.begin()
    assert "A man pushed his car" in first[0]["content"]
    return session


def _reply(text: str) -> ModelReply:
    return ModelReply(content=text)


async def test_invalid_questions_get_a_hint_and_the_third_ends_the_game() -> None:
    judge = _ScriptedJudge()
    s = await _session(judge)
    for _ in range(2):
        step = await s.step(_reply("Can we try a new game?"))
        assert step.outcome is None and not step.valid and "yes" in step.observation[0]["content"]
    step = await s.step(_reply("Great job, anything else?"))
    assert step.outcome is not None and step.outcome.status == "completed"
    assert step.outcome.details["abort"] == 6 and step.outcome.details["rounds_used"] == 3
    assert judge.calls == []  # invalid questions never reach the host


async def test_story_repeats_get_a_hint_without_judge_call_or_abort() -> None:
    judge = _ScriptedJudge()
    s = await _session(judge)
    step = await s.step(_reply("A man pushed his car to a hotel?"))
    assert "already" in step.observation[0]["content"] and step.outcome is None
    assert judge.calls == []
    step = await s.step(_reply("A man pushed his car to a hotel?"))
    step = await s.step(_reply("A man pushed his car to a hotel?"))
    assert step.outcome is None  # repeats never abort


async def test_only_the_first_line_is_asked_and_the_host_reply_is_forwarded_verbatim() -> None:
    judge = _ScriptedJudge(answer="Yes, and think about games.")
    s = await _session(judge)
    step = await s.step(_reply("Is it a game?\nIgnore this second line about a new game."))
    assert step.action == "Is it a game?"
    assert step.observation == [{"role": "user", "content": "Yes, and think about games."}]
    question = judge.calls[0][-1]["content"]
    assert question.startswith("Is it a game?\n") and "second line" not in question
    assert len(judge.calls[0]) == 11  # ten primer messages + the question


async def test_not_counts_as_no_and_irrelevant_as_neither() -> None:
    judge = _ScriptedJudge(answer="Not really.")
    s = await _session(judge)
    await s.step(_reply("Is it about a car?"))
    judge.answer = "Irrelevant."
    await s.step(_reply("Is it raining?"))
    outcome = await s.on_turn_limit()
    assert judge.kinds() == ["answer", "opposite", "answer"]
    assert (outcome.details["correct"], outcome.details["relevant"]) == (0, 1)
    assert outcome.details["relevance"] == pytest.approx(1 / 25)


async def test_known_facts_precede_later_questions() -> None:
    judge = _ScriptedJudge(compare="No")
    s = await _session(judge)
    await s.step(_reply("Is it about a car?"))
    await s.step(_reply("Is it about a hotel?"))
    await s.on_turn_limit()
    later = [m for m in judge.calls if len(m) > 1][1]
    assert len(later) == 13 and later[10]["content"].startswith("FACT:Is it about a car?")
    assert later[11] == {"role": "assistant", "content": "Yes."}
    assert judge.kinds() == ["answer", "restate", "answer", "restate", "merge"]  # two pending facts are merged


async def test_a_question_shorter_than_a_key_cannot_hit_it() -> None:
    judge = _ScriptedJudge()
    s = await _session(judge)
    await s.step(_reply("A game?"))
    assert "compare" not in judge.kinds()
    outcome = await s.on_turn_limit()
    assert outcome.score == 0.0


async def test_one_key_per_round_and_finished_only_when_all_keys_are_hit() -> None:
    judge = _ScriptedJudge()  # every comparison says yes
    s = await _session(judge, rounds=4)
    long_q = "Is it true that they were playing a board game with tokens?"
    step = await s.step(_reply(long_q))
    assert step.outcome is None
    step = await s.step(_reply(long_q))
    await s.step(_reply("Is it raining?"))
    step = await s.step(_reply("Is it raining?"))
    assert step.outcome is not None and step.outcome.status == "task_limit_exceeded"
    assert judge.kinds().count("compare") == 2  # one per round that hits: each stops at its first hit
    d = step.outcome.details
    assert (d["bingo"], d["hints"], d["progress"], d["finished"], d["finish_round"]) == (2, 2, 1.0, True, 2)
    assert d["efficiency"] == pytest.approx(1 - 2 / 4) and d["accuracy"] == pytest.approx(4 / 4)
    assert set(d["hit_keys"]) == {"They were playing a board game.", "The car is a game token."}


async def test_upstream_finished_bug_is_fixed() -> None:
    judge = _ScriptedJudge()
    s = await _session(judge, rounds=3)
    await s.step(_reply("Is it true that they were playing a board game with tokens?"))
    outcome = await s.on_turn_limit()
    # upstream: bingo (1) >= len(remaining) (1) marked the game finished after half the keys
    assert outcome.details["finished"] is False and outcome.details["efficiency"] == 0.0


async def test_empty_reply_ends_the_game_and_hostile_text_is_just_a_question() -> None:
    judge = _ScriptedJudge(answer="No.")
    s = await _session(judge)
    step = await s.step(_reply("\n__import__('os').system('rm -rf /') \x00 " + "x" * 100_000))
    assert step.action == "" and step.outcome is None  # an empty first line is asked as is
    step = await s.step(_reply("'; DROP TABLE turns; -- ?" + "\u202e" * 10))
    assert step.outcome is None
    step = await s.step(_reply(""))
    assert step.outcome is not None and step.outcome.status == "completed" and step.outcome.error is None


# -- fidelity: what upstream records, the judge's instructions ------------------------------------------


async def test_a_context_overflow_mid_game_keeps_the_progress() -> None:
    judge = _ScriptedJudge()
    s = await _session(judge)
    step = await s.step(_reply("Were they playing a board game with the car as a game token, in fact?"))
    assert step.outcome is None
    outcome = await s.on_context_limit("prompt too long")
    assert (outcome.status, outcome.paper_status) == ("context_limit_exceeded", "agent context limit")
    assert outcome.score == 0.5 and outcome.details["bingo"] == 1 and outcome.details["accuracy"] == 1 / 25
    assert outcome.error == "prompt too long"


async def test_a_judge_overflow_is_the_judges_failure_not_the_players() -> None:
    from agentbench_async.errors import ContextLimitError, ModelError

    async def overflowing(messages: list[Message]) -> ModelReply:
        raise ContextLimitError("judge prompt too long")

    env = LTPEnvironment()
    s = await env.open_session(_TASK, EpisodeContext(episode_id="e", judge=overflowing))
    await s.begin()
    with pytest.raises(ModelError, match="judge: judge prompt too long"):  # model_error: upstream TASK_ERROR
        await s.step(_reply("Was it a game?"))


async def test_end_statuses_map_to_what_upstream_records() -> None:
    s = await _session(_ScriptedJudge(), rounds=1)
    step = await s.step(_reply("Was it a game?"))
    assert step.outcome and (step.outcome.status, step.outcome.paper_status) == ("task_limit_exceeded", "task limit reached")
    s = await _session(_ScriptedJudge())
    step = await s.step(_reply(""))
    assert step.outcome and (step.outcome.status, step.outcome.paper_status) == ("completed", "completed")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_judge_instructions_are_as_strict_as_upstreams(language: str) -> None:
    from agentbench_async.envs.ltp.prompts import PROMPTERS

    p = PROMPTERS[language]
    # upstream asks for "yes", "no" or "irrelevant" after every question, with no "only" added
    assert "only" not in p.answer_instruction and "只" not in p.answer_instruction
    assert "only" not in p.start and "只" not in p.start
    # eight host rules, given in the primer and restated verbatim (no heading of our own)
    assert p.host_rules.startswith("1. ") and "\n8. " in p.host_rules and "{rules}" in p.host_intro
    # rule 5: irrelevant is the only exception, otherwise yes or no
    rule5 = p.host_rules.split("\n5. ")[1].split("\n")[0]
    assert ("otherwise" in rule5) if language == "en" else ("其他时候" in rule5)
    # the key comparison asks about key details and descriptions, answered yes or no
    assert ("key details and descriptions" in p.compare) if language == "en" else ("关键细节和描述" in p.compare)


def test_a_run_of_the_chinese_puzzles_stores_their_wording_and_is_not_resumed_into_an_earlier_ones(official_data_dir: Path, tmp_path: Path) -> None:
    """Runs of the Chinese puzzles before issue 38 played ZHPrompter's words with ``language: zh`` alone; now that the
    default is v0.2's English wording, the run stores ``prompter: en``, so its fingerprint is not an earlier run's."""
    from agentbench_async.config import build_config

    def cfg(options: dict[str, Any]):  # type: ignore[no-untyped-def]
        return build_config({"out": tmp_path / "r.duckdb", "envs": ["ltp"], "split": "dev", "data_dir": str(official_data_dir),
                             "models": [{"name": "mock-oracle", "base_url": "http://127.0.0.1:1/v1"}],
                             "judge": {"name": "mock-judge", "base_url": "http://127.0.0.1:1/v1"}, "env_options": {"ltp": options}})  # fmt: skip

    zh = cfg({"language": "zh"})
    assert zh.env_options["ltp"] == {"language": "zh", "prompter": "en"}
    earlier = cfg({"language": "zh"})
    earlier.env_options = {"ltp": {"language": "zh"}}  # as an earlier version stored it
    assert zh.fingerprint() != earlier.fingerprint()
    assert cfg({"language": "zh", "prompter": "zh"}).env_options["ltp"] == {"language": "zh", "prompter": "zh"}
    assert cfg({}).env_options.get("ltp", {}) == {}  # English puzzles: nothing added, earlier runs' fingerprints kept
