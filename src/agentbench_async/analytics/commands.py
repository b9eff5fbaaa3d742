"""The read-side commands the CLI calls: ``report``, ``show`` and ``compare``.

Each returns the process exit code and prints with the given rich Console; a user mistake (missing
file, unknown episode or model, a file locked by a running evaluation) raises an ``AgentBenchError``.
Result files are only ever opened read-only (see ``loading.load``).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.markup import escape

from .compare import Side, compare_results, pick_sides, render_comparison
from .html_report import write_html
from .loading import ReportError, Results, load
from .operations import tool_call_hints
from .plan_compare import plan_vs_spend, print_plan_vs_spend
from .report import build_report
from ..differences import changes, settings_of
from .configs import configuration
from .terminal import render, render_summary
from .transcript import render_episode


def report(
    paths: list[Path],
    *,
    html: Path | None,
    json_out: bool,
    console: Console,
    prices: dict[str, tuple[float, float]] | None = None,
    pool: bool = False,
    denominator: str = "paper",
) -> int:
    """``agentbench report FILE [FILE...] [--html OUT] [--json] [--pool] [--denominator paper|outcomes]``: every
    table, for several files together.

    ``prices`` are USD per 1M input/output tokens per model name; they override ``price_in``/``price_out``
    stored in the runs' config. Each deciding configuration of a model x environment has its own row unless
    ``pool`` merges them. ``denominator``: ``paper`` counts every episode (infrastructure failures as failures),
    ``outcomes`` the model's own outcomes only.
    """
    with load(paths, pool=pool) as res:
        rep = build_report(res, prices, denominator)
        planned = {str(p): rows for p in paths if (rows := plan_vs_spend(res, p))}  # agentbench plan's figures, where made
    if html is not None:
        write_html(rep, html, planned)
    if json_out:
        out = rep.to_dict()
        if planned:
            out["plan_vs_spend"] = planned
        console.out(json.dumps(out, ensure_ascii=False, default=str), highlight=False)
    else:
        render(rep, console)
        for rows in planned.values():
            print_plan_vs_spend(rows, console)
        if html is not None:
            console.print(f"HTML report written to {html}")
    return 0


def summary(path: Path, *, console: Console) -> int:
    """What ``agentbench demo`` prints at its end: scores, OA, top failure classes, and the commands to see more."""
    with load(path) as res:
        rep = build_report(res)
    render_summary(rep, console, str(path))
    return 0


def tool_hints(path: Path) -> list[str]:
    """The tools-mode hint lines for a run file (``operations.tool_call_hints``; the end of ``agentbench run``)."""
    with load(path) as res:
        return tool_call_hints(res)


def show(path: Path, episode_id: str, *, console: Console) -> int:
    """``agentbench show FILE EPISODE_ID``: one episode's transcript with its events and model calls."""
    with load(path) as res:
        render_episode(res, episode_id, console)
    return 0


def compare(a: Path, b: Path, *, model_a: str | None, model_b: str | None, console: Console,
            allow_different_settings: bool = False, config_a: str | None = None, config_b: str | None = None) -> int:
    """``agentbench compare A.duckdb [B.duckdb] [--model-a M] [--model-b M] [--config-a C] [--config-b C]
    [--allow-different-settings]``: flipped tasks and paired tests. With one file (a == b) it compares two models
    of that file, or one model in two configurations.

    Each side is one model in one deciding configuration: a model with several in a file is refused until
    ``--config-a``/``--config-b`` names one. Runs whose result-deciding settings (history, data, split, action
    mode, judge, environment options) differ are not paired unless ``allow_different_settings``: their scores
    differ for reasons other than the models. One model in two configurations is compared without it: the
    settings are then what is compared, and the comparison says which differ.
    """
    same = Path(a).resolve() == Path(b).resolve()
    with load(a) as res_a, (load(b) if not same else nullcontext(res_a)) as res_b:
        side_a, side_b = pick_sides(res_a, res_b, same, model_a, model_b, config_a, config_b)
        _check_settings(res_a, res_b, side_a, side_b, allow_different_settings, console)
        label_a, label_b = side_a.name, side_b.name
        if label_a == label_b:
            label_a, label_b = f"{label_a} ({Path(a).name})", f"{label_b} ({Path(b).name})"
        cmp = compare_results(res_a, res_b, side_a, side_b, label_a, label_b)
    render_comparison(cmp, console)
    return 0


def settings_difference(res_a: Results, res_b: Results, side_a: Side, side_b: Side) -> list[str]:
    """``setting: A vs B`` for the result-deciding settings in which the two sides' runs differ over the environments
    both played (empty: comparable); one model on both sides: its own settings (``max_tokens``, ...) too."""
    config_a, played_a = configuration(res_a, side_a.model, side_a.config_id)
    config_b, played_b = configuration(res_b, side_b.model, side_b.config_id)
    envs = sorted(played_a & played_b)
    same = side_a.model == side_b.model
    a = settings_of(config_a, envs, side_a.model, model_fields=same)
    b = settings_of(config_b, envs, side_b.model, model_fields=same)
    return changes(a, b, envs, envs)


def _check_settings(res_a: Results, res_b: Results, side_a: Side, side_b: Side, allow: bool, console: Console) -> None:
    diffs = settings_difference(res_a, res_b, side_a, side_b)
    if not diffs:
        return
    what = "; ".join(diffs)
    if side_a.model == side_b.model:
        console.print(f"one model in two configurations: A and B differ in {what}", highlight=False)
        return
    if not allow:
        raise ReportError(f"the runs of A ({side_a.name}) and B ({side_b.name}) differ in result-deciding settings ({what}), so "
                          "their episodes are not comparable; pass --allow-different-settings to compare them anyway")
    console.print(f"[yellow]warning: comparing runs with different result-deciding settings ({escape(what)})[/]", highlight=False)
