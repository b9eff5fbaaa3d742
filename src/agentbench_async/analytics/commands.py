"""The read-side commands the CLI calls: ``report``, ``show`` and ``compare``.

Each returns the process exit code and prints with the given rich Console; a user mistake (missing
file, unknown episode or model, a file locked by a running evaluation) raises an ``AgentBenchError``.
Result files are only ever opened read-only (see ``loading.load``).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from rich.console import Console

from .compare import compare_results, pick_model, render_comparison
from .html_report import write_html
from .loading import ReportError, Results, load
from .report import build_report
from .run_settings import model_settings, settings_conflicts
from .terminal import render, render_summary
from .transcript import render_episode


def report(
    paths: list[Path],
    *,
    html: Path | None,
    json_out: bool,
    console: Console,
    prices: dict[str, tuple[float, float]] | None = None,
) -> int:
    """``agentbench report FILE [FILE...] [--html OUT] [--json]``: every table, for several files together.

    ``prices`` are USD per 1M input/output tokens per model name; they override ``price_in``/``price_out``
    stored in the runs' config.
    """
    with load(paths) as res:
        rep = build_report(res, prices)
    if html is not None:
        write_html(rep, html)
    if json_out:
        console.out(json.dumps(rep.to_dict(), ensure_ascii=False, default=str), highlight=False)
    else:
        render(rep, console)
        if html is not None:
            console.print(f"HTML report written to {html}")
    return 0


def summary(path: Path, *, console: Console) -> int:
    """What ``agentbench demo`` prints at its end: scores, OA, top failure classes, and the commands to see more."""
    with load(path) as res:
        rep = build_report(res)
    render_summary(rep, console, str(path))
    return 0


def show(path: Path, episode_id: str, *, console: Console) -> int:
    """``agentbench show FILE EPISODE_ID``: one episode's transcript with its events and model calls."""
    with load(path) as res:
        render_episode(res, episode_id, console)
    return 0


def compare(a: Path, b: Path, *, model_a: str | None, model_b: str | None, console: Console,
            allow_different_settings: bool = False) -> int:
    """``agentbench compare A.duckdb [B.duckdb] [--model-a M] [--model-b M] [--allow-different-settings]``:
    flipped tasks and paired tests. With one file (a == b) it compares two models of that file.

    Runs whose result-deciding settings (history, data, split, action mode, judge, environment options)
    differ are not paired unless ``allow_different_settings``: their scores differ for reasons other than
    the models.
    """
    same = Path(a).resolve() == Path(b).resolve()
    with load(a) as res_a:
        if same:
            models = sorted(res_a.episodes["model"].unique().to_list())
            if model_a is None and model_b is None and len(models) == 2:
                model_a, model_b = models
            ma = pick_model(res_a, model_a, exclude=model_b, which="A")
            mb = pick_model(res_a, model_b, exclude=ma, which="B")
            _check_settings(res_a, res_a, ma, mb, allow_different_settings, console)
            cmp = compare_results(res_a, res_a, ma, mb, ma, mb)
        else:
            with load(b) as res_b:
                ma = pick_model(res_a, model_a, which="A")
                mb = pick_model(res_b, model_b, which="B")
                _check_settings(res_a, res_b, ma, mb, allow_different_settings, console)
                label_a = ma if ma != mb else f"{ma} ({Path(a).name})"
                label_b = mb if ma != mb else f"{mb} ({Path(b).name})"
                cmp = compare_results(res_a, res_b, ma, mb, label_a, label_b)
    render_comparison(cmp, console)
    return 0


def _check_settings(res_a: Results, res_b: Results, model_a: str, model_b: str, allow: bool, console: Console) -> None:
    envs_a = set(res_a.episodes.filter(pl.col("model") == model_a)["env"].unique().to_list())
    envs_b = set(res_b.episodes.filter(pl.col("model") == model_b)["env"].unique().to_list())
    envs = sorted(envs_a & envs_b)
    diffs = settings_conflicts(model_settings(res_a, model_a, envs), model_settings(res_b, model_b, envs))
    if not diffs:
        return
    what = "; ".join(diffs)
    if not allow:
        raise ReportError(f"the runs of A ({model_a}) and B ({model_b}) differ in result-deciding settings ({what}), so their "
                          "episodes are not comparable; pass --allow-different-settings to compare them anyway")
    console.print(f"[yellow]warning: comparing runs with different result-deciding settings ({what})[/]", highlight=False)
