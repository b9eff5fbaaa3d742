"""mind2web data: the Mind2Web-format loader (task files written here in the official format, a scores pickle
written here, numpy-scalar pickles, hostile pickles) and AgentBench's official prompt files."""

from __future__ import annotations

import ast
import json
import pickle
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from agentbench_async.envs.mind2web import Mind2WebEnvironment
from agentbench_async.envs.mind2web.data import load_samples, load_scores
from agentbench_async.envs.mind2web.prompts import load_prompt, prompt_path, question, round_messages
from agentbench_async.errors import ConfigError, TaskFileError

PAGE = (
    '<html backend_node_id="1"> <body backend_node_id="2"> <form backend_node_id="3" role="search">'
    ' <input backend_node_id="4" type="search" placeholder="Search products"/>'
    ' <button backend_node_id="5" type="submit"> <text backend_node_id="6">Search</text> </button> </form>'
    ' <a backend_node_id="7"> <text backend_node_id="8">Deals</text> </a>'
    ' <a backend_node_id="9"> <text backend_node_id="10">Help</text> </a> </body> </html>'
)


def _cand(node_id: str, positive: bool = False) -> dict[str, Any]:
    cand: dict[str, Any] = {"tag": "a", "attributes": "{}", "backend_node_id": node_id}
    if positive:
        cand.update(is_original_target=True, is_top_level_target=True)
    return cand


def _step(uid: str, op: str, value: str, pos: list[str], neg: list[str]) -> dict[str, Any]:
    return {
        "action_uid": uid, "raw_html": "<html/>", "cleaned_html": PAGE,
        "operation": {"op": op, "original_op": op, "value": value},
        "pos_candidates": [_cand(i, True) for i in pos], "neg_candidates": [_cand(i) for i in neg],
    }  # fmt: skip


def _task(annotation_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    reprs = [f"[button]  Step {s['action_uid']} -> {s['operation']['op']}" for s in steps]
    return {"annotation_id": annotation_id, "website": "demoshop", "domain": "Shopping", "subdomain": "General",
            "confirmed_task": "Search for red running shoes", "action_reprs": reprs, "actions": steps}  # fmt: skip


def _ranking(entries: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {"scores": {sid: {i: 1.0 - r / 10 for i, r in ranks.items()} for sid, ranks in entries.items()}, "ranks": entries}


def write_folder(root: Path, ranking: dict[str, Any] | None = None, *, pickle_bytes: bytes | None = None) -> Path:
    """A Mind2Web download in miniature: data_dev/, data_std/ and scores_all_data.pkl."""
    dev = [
        _task("t1", [_step("a1", "TYPE", "red running shoes", ["4"], ["5", "7", "9"]), _step("a2", "CLICK", "", ["5"], ["4", "7", "9"])]),
        _task("t2", [_step("a1", "CLICK", "", ["7"], ["9", "5"])]),  # the gold element ranked 12th: nothing to ask
    ]
    std = [_task("t3", [_step("a1", "CLICK", "", ["9"], ["7"])])]  # only the gold element in the top 10
    (root / "data_dev").mkdir(parents=True)
    (root / "data_std").mkdir()
    (root / "data_dev" / "part_0.json").write_text(json.dumps(dev[:1]))
    (root / "data_dev" / "part_1.json").write_text(json.dumps(dev[1:]))
    (root / "data_std" / "part_0.json").write_text(json.dumps(std))
    ranking = ranking or _ranking({
        "t1_a1": {"4": 0, "5": 1, "7": 2, "9": 3}, "t1_a2": {"5": 2, "4": 0, "7": 1, "9": 3},
        "t2_a1": {"7": 12, "9": 0, "5": 1}, "t3_a1": {"9": 0, "7": 10},
    })  # fmt: skip
    (root / "scores_all_data.pkl").write_bytes(pickle_bytes if pickle_bytes is not None else pickle.dumps(ranking))
    return root


def test_official_format_flattens_into_one_sample_per_step(tmp_path: Path) -> None:
    env = Mind2WebEnvironment(options={"mind2web_data": str(write_folder(tmp_path))})
    dev = list(env.tasks("dev"))
    assert [t.task_id for t in dev] == ["t1_a1", "t1_a2", "t2_a1"]  # files in name order, steps in order
    assert all(t.source == "official" for t in dev)
    first, second, third = (t.data for t in dev)
    assert [first["index"], second["index"], third["index"]] == [0, 1, 2]
    assert first["previous_actions"] == [] and second["previous_actions"] == ["[button]  Step a1 -> TYPE"]
    assert first["target"] == {"element": ["4"]} and second["target"] == {"element": ["5"]}  # actions: rendered per episode
    assert third["target"] is None  # no positive in the ranker's top 10
    assert "raw_html" not in first
    assert env.count("test") == 1


def test_range_options_select_sample_indices(tmp_path: Path) -> None:
    folder = str(write_folder(tmp_path))
    env = Mind2WebEnvironment(options={"mind2web_data": folder, "range_min": "1", "range_max": "2"})
    assert [t.task_id for t in env.tasks("dev")] == ["t1_a2"]
    with pytest.raises(ConfigError, match="range_max"):
        Mind2WebEnvironment(options={"mind2web_data": folder, "range_max": "-3"})


def test_a_candidate_missing_from_the_ranking_names_step_and_id(tmp_path: Path) -> None:
    ranking = _ranking({"t1_a1": {"4": 0, "5": 1, "7": 2}, "t1_a2": {}, "t2_a1": {}, "t3_a1": {}})
    env = Mind2WebEnvironment(options={"mind2web_data": str(write_folder(tmp_path, ranking))})
    with pytest.raises(TaskFileError, match=r"part_0.json: task 0 \(annotation_id t1\) action 0: candidate '9' has no entry under 't1_a1'"):
        list(env.tasks("dev"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.pop("confirmed_task"), "'confirmed_task' must be a non-empty string"),
        (lambda t: t["action_reprs"].pop(), "'action_reprs' must be a list of strings, one per action"),
        (lambda t: t["actions"][0].pop("cleaned_html"), "action 0: 'cleaned_html' must be a non-empty string"),
        (lambda t: t["actions"][0]["pos_candidates"][0].pop("backend_node_id"), "pos_candidates\\[0\\] needs a string 'backend_node_id'"),
    ],
)
def test_bad_task_records_are_one_line_errors(tmp_path: Path, mutate: Any, message: str) -> None:
    folder = write_folder(tmp_path)
    path = folder / "data_dev" / "part_0.json"
    tasks = json.loads(path.read_text())
    mutate(tasks[0])
    path.write_text(json.dumps(tasks))
    with pytest.raises(TaskFileError, match=message):
        load_samples(folder, "dev")


def test_missing_folders_and_files_say_what_is_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        Mind2WebEnvironment(options={"mind2web_data": str(tmp_path / "nope")})
    (tmp_path / "data_dev").mkdir()
    with pytest.raises(TaskFileError, match=r"no \*\.json task files"):
        list(Mind2WebEnvironment(options={"mind2web_data": str(tmp_path)}).tasks("dev"))


# -- the ranking pickle ----------------------------------------------------------------------------------


def _numpy_scalar_pickle(code: str, fmt: str, value: float | int) -> bytes:
    """The opcodes numpy writes for one scalar (protocol 4, without frames): scalar(dtype(code), bytes)."""
    data = struct.pack("<" + fmt, value)
    return (
        b"\x8c\x15numpy.core.multiarray\x8c\x06scalar\x93"
        + b"\x8c\x05numpy\x8c\x05dtype\x93\x8c" + bytes([len(code)]) + code.encode() + b"\x89\x88\x87R"
        + b"(K\x03\x8c\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
        + b"C" + bytes([len(data)]) + data + b"\x86R"
    )  # fmt: skip


def _str(s: str) -> bytes:
    return b"\x8c" + bytes([len(s)]) + s.encode()


def test_numpy_scalars_in_the_pickle_are_read_without_numpy(tmp_path: Path) -> None:
    body = b"\x80\x04}(" + _str("scores") + b"}(" + _str("t3_a1") + b"}(" + _str("9") + _numpy_scalar_pickle("f4", "f", 0.75)
    body += _str("7") + _numpy_scalar_pickle("f8", "d", 0.25) + b"uu"
    body += _str("ranks") + b"}(" + _str("t3_a1") + b"}(" + _str("9") + _numpy_scalar_pickle("i8", "q", 0)
    body += _str("7") + _numpy_scalar_pickle("i8", "q", 1) + b"uuu."
    path = tmp_path / "scores_all_data.pkl"
    path.write_bytes(body)
    scores = load_scores(path)
    assert scores == {"scores": {"t3_a1": {"9": 0.75, "7": 0.25}}, "ranks": {"t3_a1": {"9": 0, "7": 1}}}
    assert type(scores["ranks"]["t3_a1"]["9"]) is int


class _Exploit:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.target}",))


def test_a_pickle_with_code_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = pickle.dumps({"scores": {}, "ranks": {"x": _Exploit(marker)}})
    folder = write_folder(tmp_path / "data", pickle_bytes=hostile)
    with pytest.raises(TaskFileError, match=r"refusing to load (posix|os)\.system"):
        list(Mind2WebEnvironment(options={"mind2web_data": str(folder)}).tasks("dev"))
    assert not marker.exists()
    (folder / "scores_all_data.pkl").write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(TaskFileError, match="must hold a dict with 'scores' and 'ranks'"):
        load_scores(folder / "scores_all_data.pkl")
    (folder / "scores_all_data.pkl").write_bytes(b"\x80\x04garbage")
    with pytest.raises(TaskFileError, match="not a readable candidate-ranking file"):
        load_scores(folder / "scores_all_data.pkl")


# -- AgentBench's prompt files ------------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "thoughts"), [("cot", True), ("plain", False)])
def test_official_prompt_files_have_three_examples_and_an_empty_slot(official_data_dir: Path, variant: str, thoughts: bool) -> None:
    few_shot = load_prompt(prompt_path(official_data_dir, variant))
    assert few_shot.path.name == {"cot": "llm_prompt_cot.json", "plain": "llm_prompt.json"}[variant]
    raw = json.loads(few_shot.path.read_text())
    assert len(raw) == 7 and raw[-1] == {"role": "user", "content": ""}
    assert [m["role"] for m in raw[:6]] == ["user", "agent"] * 3
    assert [m["role"] for m in few_shot.examples] == ["user", "assistant"] * 3  # agent is sent as assistant
    answers = [m["content"] for m in few_shot.examples[1::2]]
    assert [("Thought:" in a) for a in answers] == [thoughts] * 3
    assert [a.split("Answer: ")[1][0] for a in answers] == ["C", "A", "D"]
    assert few_shot.wording.none_option == "None of the above" and few_shot.wording.task_label == "Task: "


def test_our_question_reproduces_the_official_example_turns(official_data_dir: Path) -> None:
    few_shot = load_prompt(prompt_path(official_data_dir, "cot"))
    for example in few_shot.examples[0::2]:
        text = example["content"]
        page = text.split("'''\n", 1)[1].split("\n'''", 1)[0]
        lines = text.split("\n")
        task = next(line for line in lines if line.startswith("Task: "))[len("Task: "):]
        start, end = lines.index("Previous actions:") + 1, next(i for i, line in enumerate(lines) if line.startswith("What should"))
        previous = [] if lines[start:end] == ["None"] else lines[start:end]
        choices = tuple((str(i), line[3:]) for i, line in enumerate(lines[end + 3 :]) if line)
        data = {"confirmed_task": task, "previous_actions": previous}
        rebuilt = round_messages(few_shot, page, question(few_shot.wording, data, choices))[-1]["content"]
        assert rebuilt == text + "\n"  # upstream's examples lack the final newline its runtime prompts have


def test_data_dir_selects_the_official_prompt_file(official_data_dir: Path) -> None:
    official = Mind2WebEnvironment(data_dir=official_data_dir)
    assert official.few_shot.path == official_data_dir / "mind2web" / "prompt" / "llm_prompt_cot.json"
    assert official.count("dev") == Mind2WebEnvironment().count("dev")  # tasks stay built-in without --mind2web-data
    plain = Mind2WebEnvironment(data_dir=official_data_dir, options={"prompt": "plain"})
    assert plain.few_shot.path.name == "llm_prompt.json"
    builtin = Mind2WebEnvironment()
    assert "environments" in str(builtin.few_shot.path) and builtin.few_shot.wording.intro.startswith("The page above")
    with pytest.raises(ConfigError, match="prompt='fancy'"):
        Mind2WebEnvironment(options={"prompt": "fancy"})


def test_a_malformed_prompt_file_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "llm_prompt_cot.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    with pytest.raises(TaskFileError, match="must be a JSON array of 7 messages"):
        load_prompt(path)
    messages = [{"role": "user" if i % 2 == 0 else "agent", "content": "no page here"} for i in range(7)]
    path.write_text(json.dumps(messages))
    with pytest.raises(TaskFileError, match="an example user turn must be"):
        load_prompt(path)


async def test_official_format_steps_play_with_upstreams_statuses(tmp_path: Path) -> None:
    from agentbench_async import statuses as st
    from agentbench_async.testing import play

    env = Mind2WebEnvironment(options={"mind2web_data": str(write_folder(tmp_path))})
    records = {t.task_id: await play(env, t, "oracle") for t in [*env.tasks("dev"), *env.tasks("test")]}
    assert {k: (r.status, r.paper_status, r.score, r.n_turns) for k, r in records.items()} == {
        "t1_a1": (st.COMPLETED, st.PAPER_COMPLETED, 1.0, 1),  # 4 candidates: one round, then the pick stands alone
        "t1_a2": (st.COMPLETED, st.PAPER_COMPLETED, 1.0, 1),
        "t2_a1": (st.COMPLETED, st.PAPER_UNKNOWN, 0.0, 0),  # gold outside the top 10: no model call, scored 0
        "t3_a1": (st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION, 0.0, 0),  # one candidate: nothing asked
    }
    assert "nothing to ask" in (records["t2_a1"].error or "")
    # the analytics' mean over episodes is upstream's step_sr over the split's samples
    dev = [records[k].score for k in ("t1_a1", "t1_a2", "t2_a1")]
    assert sum(dev) / len(dev) == pytest.approx(2 / 3)
    assert records["t1_a1"].details["action_f1"] == 1.0 and records["t1_a1"].details["prediction"] == ["4", "TYPE red running shoes"]
    assert records["t1_a1"].details["target"] == {"element": ["4"], "action": "TYPE red running shoes"}
    assert records["t1_a2"].details["target"] == {"element": ["5"], "action": "CLICK "}


async def test_a_step_whose_gold_element_cannot_be_rendered_is_an_env_error(tmp_path: Path) -> None:
    from agentbench_async import statuses as st
    from agentbench_async.testing import play

    # the gold is a <text> node: upstream's loader crashed rendering it (siblings.index); here only this step fails
    ranking = _ranking({"t1_a1": {"6": 0, "5": 1, "7": 2, "9": 3}, "t1_a2": {"5": 0, "4": 1, "7": 2, "9": 3},
                        "t2_a1": {"7": 0, "9": 1, "5": 2}, "t3_a1": {"9": 0, "7": 1}})  # fmt: skip
    folder = write_folder(tmp_path, ranking)
    data = json.loads((folder / "data_dev" / "part_0.json").read_text())
    data[0]["actions"][0]["pos_candidates"] = [_cand("6", True)]
    data[0]["actions"][0]["neg_candidates"] = [_cand(i) for i in ("5", "7", "9")]
    (folder / "data_dev" / "part_0.json").write_text(json.dumps(data))
    env = Mind2WebEnvironment(options={"mind2web_data": str(folder)})
    record = await play(env, env.get_task("dev", "t1_a1"), "oracle")
    assert record.status == st.ENV_ERROR and "t1_a1" in (record.error or "") and "gold element cannot be rendered" in (record.error or "")


async def test_with_data_dir_the_first_prompt_is_upstreams_character_for_character(official_data_dir: Path) -> None:
    """v0.2's start_sample: the 7 messages of llm_prompt_cot.json with the last one's content set by task.py's
    f-string (regex-extracted here) to the page and the question, asked in the words of the file's first example
    (what the dataloader writes: checked against upstream's own format_input_multichoice, see the README)."""
    from agentbench_async.envs.base import EpisodeContext
    from agentbench_async.envs.mind2web.dom import render_round
    from agentbench_async.envs.mind2web.protocol import initial_pool

    source = (official_data_dir / "upstream-prompts/v0.2/src/server/tasks/mind2web/task.py").read_text()
    fill = ast.literal_eval(re.search(r'self\.prompt_template\[-1\]\["content"\] = f(".*")\n', source).group(1))  # type: ignore[union-attr]
    template = json.loads((official_data_dir / "mind2web/prompt/llm_prompt_cot.json").read_text())
    lines = template[0]["content"].rpartition("\'\'\'")[2].lstrip("\n").split("\n")
    blank = lines.index("", 3)
    env = Mind2WebEnvironment(data_dir=official_data_dir)
    sample = list(env.tasks("test"))[::40]  # a sample of steps, with and without previous actions
    assert {bool(t.data["previous_actions"]) for t in sample} == {True, False}
    for task in sample:
        data = task.data
        messages = await (await env.open_session(task, EpisodeContext(episode_id="u"))).begin()
        rnd = render_round(data["cleaned_html"], initial_pool(data)[:5])
        previous = "".join(f"{a}\n" for a in data["previous_actions"][-5:]) or f"{lines[3]}\n"
        question = (f"{lines[0]}\n{lines[1].split(' ')[0]} {data['confirmed_task']}\n{lines[2]}\n{previous}{lines[blank - 1]}\n\n"
                    f"{lines[blank + 1]}\n" + "".join(f"{chr(66 + i)}. {text}\n" for i, (_, text) in enumerate(rnd.choices)))  # fmt: skip
        expected = [{"role": "assistant" if m["role"] == "agent" else "user", "content": m["content"]} for m in template]
        expected[-1]["content"] = fill.format(seq_context=rnd.page, seq_in=question)
        assert messages == expected


def test_official_steps_default_to_upstreams_indices_0_to_99_and_the_shuffle_is_named(tmp_path: Path) -> None:
    """With Mind2Web's data, upstream's Mind2Web.__init__ defaults (range_min 0, range_max 100) select the samples, as
    v0.2 ran them; the built-in suite (here read as Mind2Web data: 193 test steps) would otherwise give every step."""
    from agentbench_async.config import build_config
    from agentbench_async.envs.mind2web import builtin_dir
    from agentbench_async.settings import deviations

    official = Mind2WebEnvironment(options={"mind2web_data": str(builtin_dir())})
    indices = [t.data["index"] for t in official.tasks("test")]
    assert indices == list(range(100))
    assert len(list(Mind2WebEnvironment().tasks("test"))) == 193  # the built-in suite: every step
    wider = Mind2WebEnvironment(options={"mind2web_data": str(builtin_dir()), "range_max": "150"})
    assert len(list(wider.tasks("test"))) == 150

    def named(options: dict[str, str]) -> dict[str, str]:
        raw = {"out": str(tmp_path / "x.duckdb"), "models": ["m"], "envs": ["mind2web"], "data_dir": str(tmp_path),
               "env_options": {"mind2web": {"mind2web_data": str(builtin_dir()), **options}}}  # fmt: skip
        return {d.setting: d.value for d in deviations(build_config(raw, where="test").public_dict())}

    assert set(named({})) == {"mind2web.shuffle"}  # upstream's process-global random: recorded, never reproduced
    assert set(named({"range_max": "100"})) == {"mind2web.shuffle"}
    assert named({"range_max": "150"})["mind2web.range_max"] == "150"
