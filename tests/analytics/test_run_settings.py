"""Defaults are AgentBench v0.2's; a run records its opt-ins, ``report`` prints them above the scores and
``compare`` refuses to pair runs whose result-deciding settings differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from analytics_support import ALPHA_OS, BETA_OS, WriteRun
from rich.console import Console

from agentbench_async.analytics import ReportError, commands
from agentbench_async.analytics.html_report import render_html
from agentbench_async.analytics.loading import load
from agentbench_async.analytics.report import build_report
from agentbench_async.config import build_config


def _console() -> Console:
    return Console(width=250, record=True, color_system=None)


def _config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    raw = {"out": str(tmp_path / "x.duckdb"), "models": [{"name": "alpha"}], "envs": ["os"], **overrides}
    return build_config(raw, where="test").public_dict()


def test_defaults_are_agentbench_and_opt_ins_are_recorded(tmp_path: Path) -> None:
    default = build_config({"out": str(tmp_path / "x.duckdb"), "models": ["m"], "envs": ["os"]}, where="test")
    assert default.history == "agentbench"
    assert default.split == "test" and default.action_mode == "text"
    # the only default that is not the paper's: without --data-dir the built-in suites run, in the project's wording
    assert [d["setting"] for d in default.public_dict()["agentbench_deviations"]] == ["data", "os.prompts"]
    opted = _config(tmp_path, history="full", split="dev", envs=["ltp"], env_options={"ltp": {"rounds": "10", "language": "en"}},
                    judge={"name": "gpt-4o-mini", "temperature": 0}, data_dir=str(tmp_path))
    lines = {d["setting"]: d for d in opted["agentbench_deviations"]}
    assert set(lines) == {"history", "split", "ltp.rounds", "judge"}  # language=en is AgentBench's own
    assert lines["history"]["value"] == "full"
    assert lines["ltp.rounds"]["agentbench"] == "25"


def test_report_prints_the_settings_that_differ_above_the_scores(write_run: WriteRun, tmp_path: Path) -> None:
    path = write_run("full", {("alpha", "os"): ALPHA_OS}, config=_config(tmp_path, history="full"))
    con = _console()
    assert commands.report([path], html=None, json_out=False, console=con) == 0
    text = con.export_text()
    line = "history: full — not comparable to the paper (AgentBench v0.2: 3,500-segment truncation (--history agentbench))"
    assert line in text
    assert "data: built-in task suites — not the paper's tasks" in text
    assert text.index(line) < text.index("Scores") < text.index("Overall AgentBench score")
    assert "differs: history, data, os.prompts" in text[text.index("Scores"):]  # beside the score, named as in the list
    con = _console()
    commands.report([path], html=None, json_out=True, console=con)
    data = json.loads(con.export_text())
    assert {r["setting"]: r["value"] for r in data["settings_differing_from_agentbench"]} == {
        "history": "full", "data": "built-in task suites", "os.prompts": "the project's own instruction and one-shot example"}
    assert [r["settings"] for r in data["scores"]] == ["differs: history, data, os.prompts"]
    with load(path) as res:
        html = render_html(build_report(res))
    assert html.index("history: full — not comparable to the paper") < html.index("<h2>Scores</h2>")
    assert ">differs: history, data, os.prompts</td>" in html


def test_each_score_names_only_the_differences_that_concern_its_environment(write_run: WriteRun, tmp_path: Path) -> None:
    config = _config(tmp_path, envs=["os", "ltp"], data_dir=str(tmp_path), judge={"name": "gpt-4o-mini", "temperature": 0})
    path = write_run("judge", {("alpha", "os"): ALPHA_OS, ("alpha", "ltp"): ALPHA_OS}, config=config)
    with load(path) as res:
        report = build_report(res)
    assert dict(zip(report.scores["env"], report.scores["settings"])) == {"os": "AgentBench v0.2 settings", "ltp": "differs: judge"}


def test_show_names_the_differences_beside_the_episode_s_source(write_run: WriteRun, tmp_path: Path) -> None:
    path = write_run("full", {("alpha", "os"): ALPHA_OS}, config=_config(tmp_path, history="full", data_dir=str(tmp_path)))
    con = _console()
    assert commands.show(path, "alpha/os/test/t000/0", console=con) == 0
    assert "os (test, builtin) — settings differ from AgentBench v0.2: history" in con.export_text()


def test_report_of_a_paper_run_says_so_and_old_configs_are_judged(write_run: WriteRun, tmp_path: Path) -> None:
    paper = write_run("paper", {("alpha", "os"): ALPHA_OS}, config=_config(tmp_path, data_dir=str(tmp_path)))
    con = _console()
    commands.report([paper], html=None, json_out=False, console=con)
    text = con.export_text()
    assert "Settings: AgentBench v0.2 settings" in text
    assert "differs:" not in text and text.count("AgentBench v0.2 settings") == 2  # the line and the score row
    # a config stored before the list existed (the old default history was full): computed from the config
    old = _config(tmp_path, history="full", data_dir=str(tmp_path))
    del old["agentbench_deviations"]
    legacy = write_run("legacy", {("alpha", "os"): ALPHA_OS}, config=old, legacy=True)
    con = _console()
    commands.report([legacy], html=None, json_out=False, console=con)
    assert "history: full — not comparable to the paper" in con.export_text()
    # two runs with different settings reported together: each run's list is named
    con = _console()
    commands.report([paper, legacy], html=None, json_out=False, console=con)
    text = con.export_text()
    assert "Settings (run run-paper): AgentBench v0.2 settings." in text
    assert "Settings that differ from AgentBench v0.2 (run run-legacy):" in text


def test_compare_refuses_runs_with_different_settings_unless_asked(write_run: WriteRun, tmp_path: Path) -> None:
    a = write_run("a", {("alpha", "os"): ALPHA_OS}, config=_config(tmp_path, history="full"))
    b = write_run("b", {("beta", "os"): BETA_OS}, config=_config(tmp_path, history="agentbench"))
    with pytest.raises(ReportError, match=r"history: full vs agentbench.*--allow-different-settings"):
        commands.compare(a, b, model_a=None, model_b=None, console=_console())
    con = _console()
    assert commands.compare(a, b, model_a=None, model_b=None, console=con, allow_different_settings=True) == 0
    text = con.export_text()
    assert "warning: comparing runs with different result-deciding settings (history: full vs agentbench)" in text
    assert "9 pairs" in text
    # same settings (operational ones such as concurrency may differ): compared without a word
    c = write_run("c", {("beta", "os"): BETA_OS}, config=_config(tmp_path, history="full", max_concurrency=3))
    con = _console()
    assert commands.compare(a, c, model_a=None, model_b=None, console=con) == 0
    assert "warning" not in con.export_text()
    # environment options that decide results count too
    d = write_run("d", {("beta", "os"): BETA_OS}, config=_config(tmp_path, history="full", split="dev"))
    with pytest.raises(ReportError, match="split: test vs dev"):
        commands.compare(a, d, model_a=None, model_b=None, console=_console())


def test_built_in_suites_are_flagged_only_for_environments_whose_suites_are_not_agentbench_own(tmp_path: Path) -> None:
    # card_game's built-in samples are upstream's own generation: not "not the paper's tasks"
    only_dcg = _config(tmp_path, envs=["card_game"])
    assert "data" not in [d["setting"] for d in only_dcg["agentbench_deviations"]]
    mixed = _config(tmp_path, envs=["card_game", "os"])
    data = {d["setting"]: d for d in mixed["agentbench_deviations"]}
    assert data["data"]["value"] == "built-in task suites (os)" and list(data["data"]["envs"]) == ["os"]


def test_official_tasks_from_an_environment_s_own_download_are_not_flagged(tmp_path: Path) -> None:
    # mind2web's official steps come from --mind2web-data; --data-dir alone gives only its prompt file
    (tmp_path / "m2w").mkdir()
    official = {"mind2web": {"mind2web_data": str(tmp_path / "m2w")}}
    paper = _config(tmp_path, envs=["mind2web"], env_options=official, data_dir=str(tmp_path))
    assert [d["setting"] for d in paper["agentbench_deviations"]] == ["mind2web.shuffle"]  # upstream's unseeded order, named
    prompt_only = _config(tmp_path, envs=["mind2web", "db"], data_dir=str(tmp_path))
    assert {d["setting"]: d["value"] for d in prompt_only["agentbench_deviations"]} == {"data": "built-in task suites (mind2web)"}
    # --mind2web-data without --data-dir runs the official steps with our few-shot examples: named, not silent
    own_examples = _config(tmp_path, envs=["mind2web"], env_options=official)
    assert [(d["setting"], d["note"]) for d in own_examples["agentbench_deviations"]] == [("mind2web.shuffle", "candidate order differs"),
                                                                                      ("mind2web.prompts", "prompt wording differs")]


def test_webshop_goal_ranges_and_price_seed_decide_results(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    def run(**options: str) -> dict[str, Any]:
        # nouns given: unset, the tagger this machine has is stored and judged (tests/envs/test_webshop_nouns.py)
        webshop = {"webshop_data": str(tmp_path / "ws"), "nouns": "spacy", **options}
        return _config(tmp_path, envs=["webshop"], data_dir=str(tmp_path), env_options={"webshop": webshop})
    assert run(test_range="0:200")["agentbench_deviations"] == []  # v0.2's std range, given explicitly
    named = {d["setting"]: d["value"] for d in run(test_range="0:50", price_seed="7")["agentbench_deviations"]}
    assert named == {"webshop.test_range": "0:50", "webshop.price_seed": "7"}
