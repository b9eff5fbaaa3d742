"""A report of models unevenly done (a run still going, or interrupted): the models are compared on the tasks every
one of them has finished, the report says so in one line, and each model's numbers over all its episodes stay there."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from analytics_support import ALPHA_KG, ALPHA_OS, BETA_OS, WriteRun
from rich.console import Console

from agentbench_async.analytics import commands

LINE = "6 of 15 tasks finished by every model; compared on those (scores and OA; kg 2 of 5, os 4 of 10)"


@pytest.fixture
def uneven(write_run: WriteRun) -> Path:
    """alpha finished all 10 os tasks and 5 kg tasks (a 6th cancelled); beta only the first 4 os and 2 kg tasks."""
    return write_run("uneven", {("alpha", "os"): ALPHA_OS, ("beta", "os"): BETA_OS[:4], ("alpha", "kg"): ALPHA_KG,
                                ("beta", "kg"): ALPHA_KG[:2]})  # fmt: skip


def _text(path: Path) -> str:
    console = Console(width=250, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert commands.report([path], html=None, json_out=False, console=console) == 0
    return " ".join(re.sub(r"[│┃]", " ", console.export_text()).split())


def _json(path: Path) -> dict:  # type: ignore[type-arg]
    console = Console(width=100_000, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert commands.report([path], html=None, json_out=True, console=console) == 0
    return json.loads(console.export_text())  # type: ignore[no-any-return]


def test_scores_and_oa_compare_models_on_the_tasks_every_one_finished(uneven: Path) -> None:
    data = _json(uneven)
    assert data["compared_on"]["uneven"] is True and data["compared_on"]["line"].startswith(LINE)
    assert {(e["env"], e["tasks_finished_by_every_model"], e["tasks_finished_by_any_model"]) for e in data["compared_on"]["envs"]} == {
        ("kg", 2, 5), ("os", 4, 10)}
    compared = {(r["model"], r["env"]): (r["n"], r["score"]) for r in data["scores"]}
    # alpha's first four os tasks are all solved, beta's one of four; kg t000 (1.0) and t001 (0.5) for both
    assert compared == {("alpha", "os"): (4, 1.0), ("beta", "os"): (4, 0.25), ("alpha", "kg"): (2, 0.75), ("beta", "kg"): (2, 0.75)}
    # each model's numbers over all its episodes are kept: alpha's 10 os (4 solved) and 6 kg episodes (one cancelled)
    every = {(r["model"], r["env"]): (r["n"], r["score"]) for r in data["every_finished_episode"]["scores"]}
    assert every[("alpha", "os")] == (10, pytest.approx(0.4)) and every[("alpha", "kg")] == (6, pytest.approx(1.75 / 6))
    assert every[("beta", "os")] == (4, 0.25)
    oa = {r["model"]: r["oa"] for r in data["overall"]}
    oa_every = {r["model"]: r["oa"] for r in data["every_finished_episode"]["overall"]}
    assert oa["alpha"] == pytest.approx((100 / 10.8 + 75 / 13.9) / 2)  # on the common tasks
    assert oa_every["alpha"] == pytest.approx((40 / 10.8 + 100 * 1.75 / 6 / 13.9) / 2)
    assert oa["beta"] == pytest.approx(oa_every["beta"])  # beta finished only common tasks


def test_the_terminal_and_html_reports_say_so_in_one_line_and_list_the_full_numbers(uneven: Path, tmp_path: Path) -> None:
    text = _text(uneven)
    assert text.count(LINE) == 1
    assert text.index(LINE) < text.index("Scores (mean episode score")
    compared = text[text.index(LINE):text.index("not compared")]
    assert "alpha os success rate 100.0" in compared and "beta os success rate 25.0" in compared
    every = text[text.index("not compared"):]
    assert "alpha os success rate 40.0" in every and "alpha kg F1 29.2" in every
    html = tmp_path / "r.html"
    commands.report([uneven], html=html, json_out=False, console=Console(file=open(os.devnull, "w")))  # noqa: SIM115
    page = html.read_text()
    assert LINE in page and "Scores over all of each model's episodes" in page


def test_models_that_finished_the_same_tasks_are_reported_as_before(write_run: WriteRun) -> None:
    path = write_run("even", {("alpha", "os"): ALPHA_OS, ("beta", "os"): BETA_OS, ("alpha", "kg"): ALPHA_KG})
    data = _json(path)
    assert data["compared_on"]["uneven"] is False and data["compared_on"]["line"] is None
    assert data["every_finished_episode"] == {"scores": None, "overall": None}
    assert {(r["model"], r["env"]): r["n"] for r in data["scores"]} == {("alpha", "os"): 10, ("beta", "os"): 10, ("alpha", "kg"): 6}
    assert "finished by every model" not in _text(path)


def test_a_model_with_only_cancelled_episodes_of_an_environment_leaves_nothing_there_to_compare(write_run: WriteRun) -> None:
    path = write_run("cancelled", {("alpha", "os"): ALPHA_OS[:3], ("beta", "os"): [("cancelled", False, 0.0, "interrupted")] * 3})
    data = _json(path)
    assert data["compared_on"]["line"].startswith("0 of 3 tasks finished by every model; compared on those")
    assert data["scores"] == [] and data["overall"] == []
    # beta's os has only cancelled episodes: no score (n 0), never 0.0 out of 3 (issue 48)
    assert {(r["model"], r["n"], r["score"]) for r in data["every_finished_episode"]["scores"]} == {("alpha", 3, 1.0), ("beta", 0, None)}
