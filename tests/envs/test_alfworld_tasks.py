"""alfworld: split files (official counts, built-in suites), game roots, one-shot examples, bad files."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from agentbench_async.envs.alfworld import ALFWorldEnvironment
from agentbench_async.envs.alfworld.tasks import PROMPT_KEYS, TASK_TYPES, builtin_root, load_examples, require_official_root
from agentbench_async.envs.alfworld.prompts import load_prompts
from agentbench_async.errors import ConfigError, EnvUnavailableError, TaskFileError
from support import load_generator, require

HAS_ENGINE = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
NEED = "the alfworld extra is not installed (pip install -e '.[alfworld]')"


def test_official_split_files_load_with_readme_counts(official_data_dir: Path) -> None:
    env = ALFWorldEnvironment(data_dir=official_data_dir, options={"alfworld_data": ""})
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert len(dev) == 20 and len(test) == 50
    assert [n for _, n in sorted(Counter(t.data["type"] for t in dev).items(), key=lambda kv: list(TASK_TYPES).index(kv[0]))] == [4, 4, 3, 3, 3, 3]
    assert [Counter(t.data["type"] for t in test)[k] for k in TASK_TYPES] == [9, 9, 8, 8, 8, 8]
    assert all(t.source == "official" for t in dev + test)
    # sample index = position in the key-ordered concatenation: std 0-8 put, 9-17 clean, ..., 42-49 puttwo
    assert [t.data["prompt"] for t in test[8:10]] == ["put", "clean"] and test[42].data["prompt"] == "puttwo"
    assert test[0].task_id == "test-000" and test[0].data["index"] == 0
    assert test[0].data["game"].startswith("json_2.1.1/valid_unseen/pick_and_place_simple-")
    assert test[0].data["game"].endswith("/game.tw-pddl")
    # the data dir may also be the alfworld folder itself
    assert ALFWorldEnvironment(data_dir=official_data_dir / "alfworld").count("dev") == 20


def test_agentbench_fc_split_and_what_a_run_records_as_differing(official_data_dir: Path) -> None:
    fc = ALFWorldEnvironment(data_dir=official_data_dir, options={"official_variant": "fc"})
    test = list(fc.tasks("test"))
    assert len(test) == 109 and [Counter(t.data["type"] for t in test)[k] for k in TASK_TYPES] == [9, 5, 27, 29, 18, 21]
    assert fc.count("dev") == 20  # FC has no dev split of its own: v0.2's
    with pytest.raises(ConfigError, match=r"official_variant='fc2' .*v0.2, fc"):
        ALFWorldEnvironment(options={"official_variant": "fc2"})
    def settings(data_dir: object, mode: str) -> list[str]:
        return [d.setting for d in ALFWorldEnvironment.deviations(data_dir, {}, mode)]
    assert settings(str(official_data_dir), "text") == []  # upstream's prompts are read from the data folder
    assert settings(None, "text") == ["alfworld.prompts"]
    # FC's system text and notices are read from its pulled task.py; the calls FC leaves unanswered are answered, named
    assert settings(str(official_data_dir), "tools") == ["alfworld.tool_replies"]
    assert settings(None, "tools") == ["alfworld.tools_prompt", "alfworld.tools", "alfworld.tool_replies"]


def test_a_data_folder_without_the_upstream_prompt_files_is_one_line(official_data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "alfworld").symlink_to(official_data_dir / "alfworld")
    with pytest.raises(TaskFileError) as info:
        load_prompts(tmp_path)
    assert str(info.value) == (f"alfworld: {tmp_path}/upstream-prompts/v0.2/src/server/tasks/alfworld/task.py not found (AgentBench's "
                               f"prompts are read from it); run `agentbench data pull --dest {tmp_path}`")


def test_official_prompt_file_is_loaded_with_data_dir(official_data_dir: Path) -> None:
    examples = load_examples(official_data_dir)
    assert [len(examples[k]) for k in ("put", "clean", "heat", "cool", "puttwo", "examine")] == [14, 14, 14, 18, 18, 12]
    assert examples["cool"][-1].startswith("ACTION:") and "Your task is to: cool some pan" in examples["cool"][0]
    own = load_examples(None)
    assert set(own) == set(PROMPT_KEYS) and own["put"] != examples["put"]
    for turns in own.values():  # same structure: env/agent alternating, a THOUGHT only in the first agent turn
        assert len(turns) % 2 == 0 and "\nYour task is to: " in turns[0]
        assert turns[1].startswith("THOUGHT: ") and "\n ACTION: " in turns[1]
        assert all(t.startswith("ACTION: ") for t in turns[3::2])


def test_builtin_suites() -> None:
    env = ALFWorldEnvironment()
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert len(dev) >= 12 and len(test) >= 30
    for tasks, least in ((dev, 2), (test, 5)):
        assert all(Counter(t.data["type"] for t in tasks)[key] >= least for key in TASK_TYPES)
        for t in tasks:
            assert t.source == "builtin" and (builtin_root() / t.data["game"]).is_file()
            assert t.data["walkthrough"], t.task_id
    lengths = {len(t.data["walkthrough"]) for t in dev + test}
    assert min(lengths) <= 5 and max(lengths) >= 9  # easy and harder games
    games = {t.data["game"] for t in dev + test}
    assert len(games) == len(dev) + len(test)


def test_missing_official_games_give_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(EnvUnavailableError, match="--alfworld-data DIR or \\$ALFWORLD_DATA") as info:
        require_official_root({})
    assert "\n" not in str(info.value)
    with pytest.raises(EnvUnavailableError, match="does not exist"):
        require_official_root({"alfworld_data": str(tmp_path / "nope")})
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert require_official_root({}) == tmp_path


async def test_start_refuses_official_tasks_without_games(official_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    env = ALFWorldEnvironment(data_dir=official_data_dir)
    assert env.count("test") == 50  # listing needs no games
    with pytest.raises(EnvUnavailableError, match="official games") as info:
        await env.start()
    assert "\n" not in str(info.value)


def _split_dir(tmp_path: Path, content: object) -> Path:
    folder = tmp_path / "alfworld"
    folder.mkdir(exist_ok=True)
    (folder / "dev.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return tmp_path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "dev.json: not valid JSON"),
        (["a"], "expected an object"),
        ({"pick_and_fly": ["x/game.tw-pddl"]}, "unknown task type 'pick_and_fly'"),
        ({"pick_and_place": "x"}, "must be a list of game paths"),
        ({"pick_and_place": ["../../etc/passwd"]}, "must be relative"),
    ],
)
def test_bad_split_files(tmp_path: Path, content: object, message: str) -> None:
    env = ALFWorldEnvironment(data_dir=_split_dir(tmp_path, content))
    with pytest.raises(TaskFileError, match=message) as info:
        list(env.tasks("dev"))
    assert "\n" not in str(info.value)
    with pytest.raises(TaskFileError, match="standard.json not found"):
        list(env.tasks("test"))
    with pytest.raises(TaskFileError, match="unknown split"):
        list(env.tasks("train"))


def test_official_walkthroughs_are_read_when_the_games_are_here(tmp_path: Path) -> None:
    game = "json_2.1.1/valid_unseen/pick_and_place_simple-Pen-None-Desk-1/trial_1/game.tw-pddl"
    data = _split_dir(tmp_path, {"pick_and_place": [game, game.replace("Pen", "Cup")]})
    root = tmp_path / "games"
    (root / game).parent.mkdir(parents=True)
    (root / game).write_text(json.dumps({"walkthrough": ["go to desk 1", "take pen 1 from desk 1"]}))
    tasks = list(ALFWorldEnvironment(data_dir=data, options={"alfworld_data": str(root)}).tasks("dev"))
    assert tasks[0].data["walkthrough"] == ["go to desk 1", "take pen 1 from desk 1"]
    assert "walkthrough" not in tasks[1].data


def test_logic_converted_from_the_package_is_agentbenchs_2_1_1(official_data_dir: Path) -> None:
    """The domain and grammar the built-in games embed, derived from the installed alfworld (2.1.2 files),
    are byte for byte the 2.1.1 files AgentBench's games were made with."""
    require(HAS_ENGINE, NEED)
    from agentbench_async.envs.alfworld.logic import load_logic_211

    domain, grammar = load_logic_211()
    logic = official_data_dir / "alfworld" / "agentbench-fc" / "logic"
    assert domain == (logic / "alfred.pddl").read_text(encoding="utf-8")
    assert grammar == (logic / "alfred.twl2").read_text(encoding="utf-8")
    assert 'template :: "put {o} in/on {r}";' in grammar and "action help" not in grammar


def test_generator_reproduces_the_committed_suites() -> None:
    require(HAS_ENGINE, NEED)
    files = load_generator("alfworld").build(play=False)  # the oracle tests above play every game
    root = builtin_root()
    committed = {str(p.relative_to(root)) for p in root.joinpath("games").rglob("*") if p.is_file()}
    assert committed == {rel for rel in files if rel.startswith("games/")}
    for rel, text in files.items():
        assert (root / rel).read_text(encoding="utf-8") == text, f"{rel} differs: run environments/alfworld/generate.py"


async def test_a_data_folder_without_the_split_files_games_is_refused(official_data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "json_2.1.2").mkdir()
    env = ALFWorldEnvironment(data_dir=official_data_dir, options={"alfworld_data": str(tmp_path)})
    with pytest.raises(EnvUnavailableError, match="has no json_2.1.1/ .*json_2.1.2.*grammar differs") as info:
        await env.start()
    assert "\n" not in str(info.value)
