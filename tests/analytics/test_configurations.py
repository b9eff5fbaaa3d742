"""One score per deciding configuration: a file holding two configurations of one model x environment (a run and
a `--new-run` with another --history) reports two rows labelled by what differs, in `report` (terminal, JSON, HTML),
`compare` and the summary; `--pool` merges them only when asked, and says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from analytics_support import ALPHA_OS, BETA_OS, WriteRun, run_config, two_configurations
from rich.console import Console

from agentbench_async.analytics import commands, load
from agentbench_async.analytics.configs import config_table
from agentbench_async.analytics.loading import ReportError

def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": str(columns)}, timeout=120)  # fmt: skip


def _printed(command: Callable[..., int], *args: object, width: int = 80, **kwargs: object) -> str:
    """What an analytics command prints on a console of ``width`` columns (in this process: fast)."""
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert command(*args, console=console, **kwargs) == 0
    return console.export_text()


def _json(path: Path, pool: bool = False) -> dict:  # type: ignore[type-arg]
    return json.loads(_printed(commands.report, [path], html=None, json_out=True, pool=pool, width=100_000))


@pytest.fixture
def two_configs(write_run: WriteRun) -> Path:
    return two_configurations(write_run)


def test_two_configurations_are_two_labelled_rows_never_one_pooled_score(two_configs: Path) -> None:
    data = _json(two_configs)
    kg = sorted((r for r in data["scores"] if r["env"] == "kg"), key=lambda r: r["config"])
    # before: one kg row with n = 10 (6 + 4 episodes of the same tasks) and one interval; now one row per configuration
    # (every episode counts, the paper's denominator: the cancelled kg episode of the first configuration scores 0)
    assert [(r["config"], r["n"]) for r in kg] == [("history: agentbench", 6), ("history: full", 4)]
    assert kg[1]["score"] == pytest.approx(2.5 / 4) and kg[0]["score"] == pytest.approx(1.75 / 6)
    assert {r["config_id"] for r in kg} == {"aaaa1111", "bbbb2222"}
    os_rows = [r for r in data["scores"] if r["env"] == "os"]  # played in the first configuration only: labelled as such
    assert [(r["config"], r["n"]) for r in os_rows] == [("history: agentbench", 10)]
    assert sorted((r["config"], r["envs_run"]) for r in data["overall"]) == [("history: agentbench", 2), ("history: full", 1)]
    classes = [(r["config"], r["total"]) for r in data["failure_classes"] if r["env"] == "kg"]
    assert sorted(classes) == [("history: agentbench", 6), ("history: full", 4)]
    assert {r["config"] for r in data["paper_failure_table"]["rows"] if r["env"] == "kg"} == {"history: agentbench", "history: full"}


def test_the_terminal_report_labels_the_rows_and_says_they_are_kept_apart(two_configs: Path) -> None:
    proc = _cli("report", str(two_configs))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    # COLUMNS=80: the tables are laid out for 80 columns; text lines are whole lines, never broken (output.py)
    assert max(len(line) for line in text.splitlines() if line[:1] in "┏┃┡│└┌├╞╘") <= 80
    flat = " ".join(text.split())
    assert "alpha · kg: 2 configurations, one row each (history: agentbench | history: full)" in flat
    assert "--pool merges them anyway" in flat
    scores = text.split("Scores (")[1].split("Overall")[0]
    assert len(re.findall(r"^alpha\b", scores, re.M)) == 3  # kg twice, os once: the label wraps inside the model cell
    assert not re.search(r"\b\w{1,3}…", text.split("Top failure reasons")[0]), "a header or number was cut"
    wide = _printed(commands.report, [two_configs], html=None, json_out=False, width=200)
    rows = re.findall(r"^│? ?(alpha \(history: \w+\))\s+│?\s*(kg|os)\b", wide.split("Scores (")[1].split("Overall")[0], re.M)
    assert sorted(rows) == [("alpha (history: agentbench)", "kg"), ("alpha (history: agentbench)", "os"), ("alpha (history: full)", "kg")]


def test_pool_merges_configurations_only_when_asked_and_says_so(two_configs: Path) -> None:
    pooled = _json(two_configs, pool=True)
    kg = [r for r in pooled["scores"] if r["env"] == "kg"]
    assert pooled["pooled"] and len(kg) == 1 and kg[0]["n"] == 10 and kg[0]["config"] == "pooled: 2 configurations"
    text = " ".join(_printed(commands.report, [two_configs], html=None, json_out=False, pool=True).split())
    assert "--pool: rows merge several configurations (alpha · kg)" in text and "a task run in two counts twice" in text


def test_compare_pairs_one_configuration_with_the_other(two_configs: Path) -> None:
    flat = " ".join(_printed(commands.compare, two_configs, two_configs, model_a=None, model_b=None).split())
    assert "one model in two configurations: A and B differ in history: agentbench vs full" in flat
    assert "A = alpha (history: agentbench) vs B = alpha (history: full)" in flat
    assert "4 pairs:" in flat  # the four kg tasks both played; never os (one configuration only) paired with itself
    chosen = " ".join(_printed(commands.compare, two_configs, two_configs, model_a=None, model_b=None, config_a="bbbb",
                               config_b="history: agentbench").split())
    assert "A = alpha (history: full) vs B = alpha (history: agentbench)" in chosen


def test_compare_refuses_to_pool_a_side_with_several_configurations(two_configs: Path, write_run: WriteRun) -> None:
    write_run("fp", {("beta", "os"): BETA_OS}, config=run_config("agentbench", ("beta",)), fingerprint="cccc3333", run_id="run-beta",
              path=two_configs)
    refused = _cli("compare", str(two_configs), "--model-a", "alpha", "--model-b", "beta")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "alpha has 2 configurations" in refused.stderr and "--config-a" in refused.stderr
    assert "history: agentbench (id aaaa1111)" in refused.stderr and "history: full (id bbbb2222)" in refused.stderr
    ok = _printed(commands.compare, two_configs, two_configs, model_a="alpha", config_a="history: agentbench", model_b="beta")
    assert "A = alpha (history: agentbench) vs B = beta" in " ".join(ok.split())
    with pytest.raises(ReportError, match=r"no configuration 'history: none' \(A\)"):
        _printed(commands.compare, two_configs, two_configs, model_a=None, model_b=None, config_a="history: none")


def test_configurations_with_the_same_settings_are_told_apart_by_the_rest_of_the_run(write_run: WriteRun) -> None:
    # alpha alone, then alpha with beta (--new-run): alpha's own settings are the same, its fingerprint is not
    path = write_run("same", {("alpha", "os"): ALPHA_OS}, config=run_config("agentbench"), fingerprint="f1", run_id="r1")
    write_run("same", {("alpha", "os"): ALPHA_OS, ("beta", "os"): BETA_OS}, config=run_config("agentbench", ("alpha", "beta")),
              fingerprint="f2", run_id="r2", path=path)
    with load(path) as res:
        table = config_table(res)
    alpha = dict(table.filter(table["model"] == "alpha").select("config_id", "config").iter_rows())
    assert alpha == {"f1": "models in the run: alpha", "f2": "models in the run: alpha, beta"}
    beta = table.filter(table["model"] == "beta")
    assert beta["config"].to_list() == [""]


def test_html_report_and_demo_summary_carry_the_labels(two_configs: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    _printed(commands.report, [two_configs], html=out, json_out=False)
    page = out.read_text()
    assert "alpha (history: full)" in page and "alpha (history: agentbench)" in page
    assert "2 configurations, one row each" in page
    text = _printed(commands.summary, two_configs, width=120)
    assert re.search(r"alpha \(history: full\)\s+│\s+62\s+│\s+│", text), text  # its own kg score (62.5%), no os
    assert re.search(r"alpha \(history: agentbench\)\s+│\s+29\s+│\s+40\s+│", text), text  # kg 1.75/6, os 4/10
    assert "alpha (history: agentbench): completed wrong 5 (31%)" in text and "alpha (history: full): completed wrong 2 (50%)" in text
