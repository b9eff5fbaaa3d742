"""Configuration labels that are true: a label names only the settings that differ between the configurations shown,
over the settings that apply to the environments each run played (issue 36). The scenario of the issue, played for real
through the mock: one model, ``--env all --max-tokens 256`` then ``--env db,os --max-tokens 128 --new-run`` with
AgentBench's data (kg, alfworld and webshop then play their built-in suites and their own prompt wording in the first
run only): every row, comparison and page says ``max_tokens: 256`` / ``max_tokens: 128`` and nothing else. Changing only
the environment list resumes; a changed setting is refused with the setting named as the user set it."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from analytics_support import ALPHA_KG, KG_FULL, WriteRun, run_config
from engine_support import mock_process, query
from support import OFFICIAL_DATA, require

from agentbench_async.analytics import commands
from agentbench_async.analytics.configs import labels
from agentbench_async.view.export import export

HAS_MARIADB = bool(shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK))


def _run(base_url: str, out: Path, envs: str, max_tokens: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-weak", "--base-url", base_url,
                           "--task-header", "--judge-model", "mock-judge", "--env", envs, "--data-dir", str(OFFICIAL_DATA),
                           "--limit", "1", "--max-tokens", str(max_tokens), "--no-progress", "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    require(HAS_MARIADB, "mariadbd is not installed (apt-get install mariadb-server)")
    out = tmp_path_factory.mktemp("labels") / "two.duckdb"
    with mock_process("--data-dir", str(OFFICIAL_DATA)) as base_url:
        first = _run(base_url, out, "all", 256)
        assert first.returncode == 0, first.stderr
        refused = _run(base_url, out, "db,os", 128)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        # the one setting the user changed, in their words; never an environment the new run does not name
        assert "different run config (max_tokens: 256 in the file, 128 now)" in refused.stderr, refused.stderr
        second = _run(base_url, out, "db,os", 128, "--new-run")
        assert second.returncode == 0, second.stderr
    return out


def test_the_stored_settings_claim_nothing_for_environments_not_run(two_runs: Path) -> None:
    configs = [json.loads(c) for (c,) in query(two_runs, "SELECT config FROM runs ORDER BY created_at")]
    assert configs[1]["envs"] == ["db", "os"] and configs[1]["data_dir_skipped"] == {}
    assert set(configs[1]["env_options"]) <= {"db", "os"}
    assert all(set(d["envs"]) <= {"db", "os"} for d in configs[1]["agentbench_deviations"])
    # the first run did play kg, alfworld and webshop on their built-in suites: its record says so
    assert {"kg", "alfworld", "webshop"} <= set(configs[0]["data_dir_skipped"])


def test_report_labels_the_rows_by_the_one_setting_that_differs(two_runs: Path, tmp_path: Path) -> None:
    data = json.loads(_cli("report", str(two_runs), "--json").stdout)
    by_env: dict[str, set[str]] = {}
    for row in data["scores"]:
        by_env.setdefault(row["env"], set()).add(row["config"])
    assert by_env["db"] == by_env["os"] == {"max_tokens: 256", "max_tokens: 128"}, by_env
    assert by_env["kg"] == {"max_tokens: 256"}  # played in the first configuration only: its label all the same
    assert sorted(r["config"] for r in data["overall"]) == ["max_tokens: 128", "max_tokens: 256"]
    text = " ".join(_cli("report", str(two_runs)).stdout.split())
    assert "mock-weak · db: 2 configurations, one row each (max_tokens: 128 | max_tokens: 256)" in text, text
    assert "kg: official" not in text and "webshop.prompts: default" not in text
    page = tmp_path / "r.html"
    assert _cli("report", str(two_runs), "--html", str(page)).returncode == 0
    assert "mock-weak (max_tokens: 128)" in page.read_text() and "webshop.prompts" not in page.read_text().split("Settings that differ")[0]


def test_compare_names_exactly_the_setting_that_differs(two_runs: Path) -> None:
    proc = _cli("compare", str(two_runs))
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "one model in two configurations: A and B differ in max_tokens: 128 vs 256" in flat, flat
    assert "A = mock-weak (max_tokens: 128) vs B = mock-weak (max_tokens: 256)" in flat


def test_the_view_export_labels_the_configurations_the_same_way(two_runs: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    export([two_runs], site)
    overview = (site / "index.html").read_text()
    assert "mock-weak (max_tokens: 256)" in overview and "mock-weak (max_tokens: 128)" in overview
    assert "kg: official" not in overview and "alfworld.prompts" not in (site / "failures.html").read_text()


def test_changing_only_the_environment_list_resumes_the_same_configuration(two_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "resume.duckdb"
    shutil.copy(two_runs, out)
    with mock_process("--data-dir", str(OFFICIAL_DATA)) as base_url:
        proc = _run(base_url, out, "db", 256)  # the first run's settings, one of its environments: nothing left to do
    assert proc.returncode == 0, proc.stderr
    assert "0 episodes finished" in " ".join(proc.stdout.split()) + " ".join(proc.stderr.split())
    assert query(out, "SELECT count(DISTINCT fingerprint) FROM runs") == [(2,)]


def test_a_label_ignores_the_settings_of_environments_a_configuration_did_not_play() -> None:
    def config(max_tokens: int, envs: list[str], **extra: object) -> dict[str, object]:
        return {"models": [{"name": "m", "max_tokens": max_tokens, "temperature": 0.0}], "envs": envs, "split": "test",
                "history": "agentbench", "action_mode": "text", "seed": 0, "env_options": {}, **extra}  # fmt: skip

    every = config(256, ["db", "ltp"], judge={"name": "judge-a", "temperature": 0})
    fewer = config(128, ["db"], judge={"name": "judge-b", "temperature": 0})  # its judge judged nothing: not a difference
    assert labels({"a": every, "b": fewer}, {}, "m", {"a": {"db", "ltp"}, "b": {"db"}}) == {"a": "max_tokens: 256", "b": "max_tokens: 128"}
    # a third configuration that played ltp with another judge: the judge tells it apart from the first, and only there
    third = config(256, ["ltp"], judge={"name": "judge-b", "temperature": 0})
    found = labels({"a": every, "b": fewer, "c": third}, {}, "m", {"a": {"db", "ltp"}, "b": {"db"}, "c": {"ltp"}})
    assert found == {"a": "max_tokens: 256, judge: judge-a", "b": "max_tokens: 128", "c": "max_tokens: 256, judge: judge-b"}
    # a long value is cut in the label (the report's settings table and the view's hover text carry it whole)
    long = config(256, ["db"])
    long["models"] = [{"name": "m", "max_tokens": 256, "temperature": 0.0,
                       "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}}]
    cut = labels({"a": every, "l": long}, {}, "m", {"a": {"db"}, "l": {"db"}})["l"]
    assert cut.startswith("extra_body: {\"chat_template_kwargs\"") and cut.endswith("…") and len(cut) <= len("extra_body: ") + 40


def test_a_cut_label_is_whole_in_the_report_and_on_hover_in_the_view(write_run: WriteRun, tmp_path: Path) -> None:
    body = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "repetition_penalty": 1.05}
    plain, tuned = run_config("agentbench"), run_config("agentbench")
    tuned["models"] = [{"name": "alpha", "extra_body": body}]
    path = write_run("cut", {("alpha", "kg"): ALPHA_KG}, config=plain, fingerprint="aaaa1111", run_id="run-plain")
    write_run("cut", {("alpha", "kg"): KG_FULL}, config=tuned, fingerprint="bbbb2222", run_id="run-tuned", path=path)
    whole = "extra_body: " + json.dumps(body, sort_keys=True)
    data = json.loads(_cli("report", str(path), "--json").stdout)
    label = next(r["config"] for r in data["scores"] if r["config"] != "extra_body: default")
    assert label.endswith("…") and len(label) < len(whole) and whole.startswith(label[:-1])
    assert {r["settings"] for r in data["configurations"]} == {"extra_body: default", whole}
    text = _cli("report", str(path)).stdout
    assert f"alpha ({label}): every setting that differs: {whole}" in " ".join(text.split())  # once, whole
    site = tmp_path / "site"
    export([path], site)
    overview = (site / "index.html").read_text()
    assert f'<span title="{html.escape(f"alpha ({whole})")}">{html.escape(f"alpha ({label})")}</span>' in overview


def test_settings_of_an_environment_that_never_played_are_not_claimed(write_run: WriteRun) -> None:
    # a run of kg and alfworld where alfworld could not start here: its prompt wording was never used
    config = {**run_config("agentbench"), "envs": ["kg", "alfworld"], "agentbench_deviations": [
        {"setting": "alfworld.prompts", "value": "the project's own instruction", "agentbench": "upstream's",
         "note": "prompt wording differs", "envs": ["alfworld"]},
        {"setting": "history", "value": "full", "agentbench": "3,500-segment truncation", "note": "not comparable", "envs": []}]}
    path = write_run("unplayed", {("alpha", "kg"): ALPHA_KG}, config=config, fingerprint="aaaa1111", run_id="run-kg")
    text = " ".join(_cli("report", str(path)).stdout.split())
    assert "history: full — not comparable" in text and "alfworld.prompts" not in text


def test_a_label_names_the_fewest_settings_that_tell_the_configurations_apart() -> None:
    def config(history: str, **model: object) -> dict[str, object]:
        return {"models": [{"name": "m", **model}], "envs": ["db"], "split": "test", "history": history, "action_mode": "text",
                "seed": 0, "env_options": {}}  # fmt: skip

    # four settings differ; max_tokens alone tells the three apart (history alone does not: two are agentbench)
    configs = {"a": config("agentbench", max_tokens=256, temperature=0.0), "b": config("full", max_tokens=128, temperature=0.7),
               "c": config("agentbench", max_tokens=512, temperature=0.2)}  # fmt: skip
    played = dict.fromkeys(configs, {"db"})
    assert labels(configs, {}, "m", played) == {"a": "max_tokens: 256", "b": "max_tokens: 128", "c": "max_tokens: 512"}
    # the whole story (the report's Configurations table, the viewer's hover): every setting that differs, uncut
    assert labels(configs, {}, "m", played, cut=False)["b"] == "history: full, max_tokens: 128, temperature: 0.7"
    # two settings needed when no one of them tells all apart
    pair = {"a": config("agentbench", max_tokens=256), "b": config("full", max_tokens=256), "c": config("full", max_tokens=128)}
    assert labels(pair, {}, "m", dict.fromkeys(pair, {"db"})) == {
        "a": "history: agentbench, max_tokens: 256", "b": "history: full, max_tokens: 256", "c": "history: full, max_tokens: 128"}


def test_a_resume_refusal_names_only_what_the_user_changed() -> None:
    from agentbench_async.differences import config_changes

    every = {"models": [{"name": "m", "max_tokens": 256}], "envs": ["os", "db", "card_game", "kg"], "split": "test",
             "history": "agentbench", "action_mode": "text", "seed": 0, "data_dir": "/data", "data_dir_skipped": {"kg": "no endpoint"},
             "env_options": {"card_game": {"acknowledgement": "upstream"}}}  # fmt: skip
    fewer = {**every, "envs": ["db", "os"], "data_dir_skipped": {}, "env_options": {}}
    # before: "env_options: {'card_game': {'acknowledgement': 'upstream'}} in the file, {} now" for a run of db,os
    assert config_changes(every, fewer) == []
    assert config_changes(every, {**fewer, "models": [{"name": "m", "max_tokens": 128}]}) == ["max_tokens: 256 in the file, 128 now"]
    assert config_changes(every, {**every, "history": "full"}) == ["history: agentbench in the file, full now"]
