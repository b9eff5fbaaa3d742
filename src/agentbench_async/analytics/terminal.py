"""Rich tables for the terminal.

Every table is printed through ``print_table``: as it is when the terminal is wide enough for every header
and cell word, else without vertical rules, else split into column groups that repeat the row's key columns
(model, env), so no header or number is ever cut to "co…" at 80 columns and a wide terminal shows one table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl
from rich import box
from rich.console import Console
from rich.cells import cell_len
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..wording import counted, duration, moment
from . import behaviour, notes
from .configs import shown
from .failures import FAILURE_CLASSES, INFRA_CLASSES, PAPER_COLUMNS, PAPER_TITLES, shown_classes
from .report import Report
from .run_settings import AGENTBENCH_SETTINGS


def pct(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:
        return "–"
    return f"{100 * value:.{digits}f}"


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def ms(value: Any) -> str:
    """Milliseconds as whole numbers (``46,174``); a dash when unknown."""
    return _num(round(value) if isinstance(value, float) and value == value else value)


def _model(row: dict[str, Any]) -> str:
    """The row's model as a table cell (rich markup escaped), with its configuration's label when it has one."""
    return escape(shown(row))


def _short(text: str | None, limit: int = 80) -> str:
    if not text:
        return ""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def scores_table(report: Report, rows: pl.DataFrame | None = None, title: str = "") -> Table:
    """The scores per model x env (``rows``: another frame of the same columns, e.g. ``report.scores_all``)."""
    counted = ("every episode, infrastructure failures as failures (the paper's denominator)" if report.denominator == "paper"
               else "the model's own outcomes; infrastructure failures not counted")
    table = Table(title=f"Scores (mean episode score, %; {counted}){title}", title_justify="left")
    infra_column = "infra (in n)" if report.denominator == "paper" else "infra excluded"
    for col, just in (("model", "left"), ("env", "left"), ("metric", "left"), ("score", "right"), ("95% CI", "right"),
                      ("n", "right"), (infra_column, "right"), ("settings", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in (report.scores if rows is None else rows).iter_rows(named=True):
        infra = r["env_errors"] + r["model_errors"] + r["cancelled"]
        infra_text = "0" if infra == 0 else f"{infra} (env {r['env_errors']}, model {r['model_errors']}, cancelled {r['cancelled']})"
        ci = "–" if r["ci_low"] is None else f"{pct(r['ci_low'])}–{pct(r['ci_high'])} ({r['ci_method']})"
        settings = r.get("settings") or AGENTBENCH_SETTINGS
        table.add_row(_model(r), r["env"], r["metric"], pct(r["score"]), ci, str(r["n"]), infra_text,
                      settings if settings == AGENTBENCH_SETTINGS else f"[yellow]{escape(settings)}[/]")
    return table


def overall_table(report: Report, rows: pl.DataFrame | None = None, title: str = "") -> Table:
    table = Table(title=f"Overall AgentBench score (OA = mean of score% / weight⁻¹; paper weights){title}", title_justify="left")
    table.add_column("model")
    table.add_column("OA", justify="right")
    table.add_column("which")
    for r in (report.overall if rows is None else rows).iter_rows(named=True):
        table.add_row(_model(r), f"{r['oa']:.2f}", r["label"] if r["label"] == "OA" else f"[yellow]{escape(r['label'])}[/]")
    return table


# Narrow terminals: the failure classes under short names on purpose (the paper's own CLE/TLE style), with a legend
SHORT_CLASSES: dict[str, str] = {
    "completed_success": "ok", "completed_wrong": "wrong", "context_limit_exceeded": "CLE", "invalid_format": "IF",
    "invalid_action": "IA", "task_limit_exceeded": "TLE", "episode_limit_exceeded": "ELE", "env_error": "env", "model_error": "API", "cancelled": "cancel",
    "completed": "Completed",
}  # fmt: skip
CLASS_LEGEND = ("ok/wrong = completed with a right/wrong answer; CLE = context limit exceeded; IF = invalid format; "
                "IA = invalid action; TLE = task limit exceeded; ELE = episode limit exceeded (episode_limits); env, API = environment or model-server failures; "
                "cancel = cancelled")  # fmt: skip


def classes_table(report: Report, short: bool = False) -> Table:
    """Counts (and shares) per failure class; ``short``: counts only, under the short class names."""
    what = "count" if short else "count (share %)"
    table = Table(title=f"Failure classes per model × env: {what}; infrastructure classes are not the model's fault",
                  title_justify="left")
    table.add_column("model")
    table.add_column("env")
    classes = shown_classes(report.class_counts)
    for cls in classes:
        style = "dim" if cls in INFRA_CLASSES else None
        table.add_column(SHORT_CLASSES[cls] if short else cls.replace("_", " "), justify="right", style=style)
    table.add_column("total", justify="right")
    for r in report.class_counts.iter_rows(named=True):
        if short:
            cells = [str(r[c]) for c in classes]
        else:
            cells = [f"{r[c]} ({pct(r[c] / r['total'] if r['total'] else None, 0)}%)" if r[c] else "0" for c in classes]
        table.add_row(_model(r), r["env"], *cells, str(r["total"]))
    return table


def paper_table(report: Report, short: bool = False) -> Table:
    table = Table(
        title="AgentBench paper convention (% of episodes): Task Limit Exceeded also holds env/API errors; cancelled left out",
        title_justify="left",
    )
    table.add_column("model")
    table.add_column("env")
    for col in PAPER_COLUMNS:
        table.add_column(SHORT_CLASSES[col] if short else PAPER_TITLES[col], justify="right")
    table.add_column("episodes", justify="right")
    for r in report.paper.iter_rows(named=True):
        table.add_row(_model(r), r["env"], *[pct(r[c]) for c in PAPER_COLUMNS], str(r["episodes"]))
    return table


def print_reasons(report: Report, console: Console) -> None:
    """The top failure reasons: a table when it fits, else one short block per reason."""
    table = reasons_table(report)
    if _min_width(console, table) <= console.width:
        print_table(console, table)
        return
    console.print(f"[bold]{table.title}[/]", highlight=False)
    for r in report.reasons.iter_rows(named=True):
        example = (r["examples"] or [{}])[0]
        turns = f"{_num(r['turns_min'])}/{_num(r['turns_median'], 1)}/{_num(r['turns_max'])}"
        console.print(f"[bold]{_model(r)}[/] · {r['env']} · {r['failure_class']} · {counted(r['episodes'], 'episode')} · "
                      f"turns min/med/max {turns}", highlight=False)  # fmt: skip
        console.print(f"  reason: {escape(_short(r['reason'], 200))}", highlight=False)
        if example.get("episode_id"):
            reply = _short(example.get("last_output"), 120) or "(no reply of the model)"
            console.print(f"  e.g. {escape(example['episode_id'])}: {escape(reply)}", highlight=False)


def reasons_table(report: Report) -> Table:
    table = Table(title="Top failure reasons (drill down with: agentbench show FILE EPISODE_ID)", title_justify="left")
    for col in ("model", "env", "class", "reason", "episodes", "turns min/med/max", "example episode", "its last output"):
        table.add_column(col, overflow="fold")
    for r in report.reasons.iter_rows(named=True):
        example = (r["examples"] or [{}])[0]
        turns = f"{_num(r['turns_min'])}/{_num(r['turns_median'], 1)}/{_num(r['turns_max'])}"
        table.add_row(_model(r), r["env"], r["failure_class"], _short(r["reason"], 60), str(r["episodes"]), turns,
                      example.get("episode_id") or "", _short(example.get("last_output"), 60))
    return table


def behaviour_table(report: Report) -> Table | None:
    """How the failures happened: loops among the task-limit episodes and recovery after refused actions."""
    frame = report.behaviour
    if frame is None or frame.is_empty():
        return None
    table = Table(title="How episodes failed: task-limit episodes that looped or stalled; recovery after a refused action",
                  title_justify="left")
    for col in ("model", "env", "task limit, looping", "task limit, stalled", "recovered after a refused action"):
        table.add_column(col, justify="left" if col in ("model", "env") else "right")
    for r in frame.iter_rows(named=True):
        table.add_row(_model(r), r["env"], behaviour.share_text(r["tle_looping"], r["tle_episodes"]),
                      behaviour.share_text(r["tle_stalled"], r["tle_episodes"]),
                      behaviour.recovery_text(r))
    return table


def print_behaviour(report: Report, console: Console) -> None:
    """The behaviour table, an example episode of each row with its evidence, and what the words mean."""
    table = behaviour_table(report)
    if table is None or report.behaviour is None:
        return
    print_table(console, table)
    for r in report.behaviour.iter_rows(named=True):
        for kind, example in behaviour.examples(r)[:1]:
            console.print(f"  {_model(r)} · {r['env']} · {kind}: {escape(example['episode_id'])} — "
                          f"{escape(_short(example['evidence'], 120))}", highlight=False)
    console.print(f"[dim]{behaviour.NOTE}[/]", highlight=False)


def repeats_tables(report: Report) -> list[Table]:
    if report.pass_k.is_empty():
        return []
    tries = ("every try, infrastructure failures as failed tries" if report.denominator == "paper"
             else "the model's own outcomes; infrastructure failures not counted")
    infra_column = "infra (in n)" if report.denominator == "paper" else "infra excluded"
    table = Table(title=f"Repeats: pass@k (any of k tries succeeds) and pass^k (all k succeed), % of tasks; {tries}", title_justify="left")
    for col in ("model", "env", "k", "tasks", "pass@k", "pass^k", infra_column):
        table.add_column(col, justify="left" if col in ("model", "env") else "right")
    for r in report.pass_k.iter_rows(named=True):
        table.add_row(_model(r), r["env"], str(r["k"]), str(r["tasks"]), pct(r["pass_at_k"]), pct(r["pass_hat_k"]), str(r["infra"]))
    spread = Table(title=f"Run-to-run spread of the score over repeats (%; {tries})", title_justify="left")
    for col in ("model", "env", "repeats", "mean", "stddev", "min", "max", infra_column):
        spread.add_column(col)
    for r in report.spread.iter_rows(named=True):
        spread.add_row(_model(r), r["env"], str(r["repeats"]), pct(r["mean_score"]), pct(r["stddev"]), pct(r["min_score"]),
                       pct(r["max_score"]), str(r["infra"]))
    return [table, spread]


def cost_tables(report: Report) -> list[Table]:
    """Cost per model × environment (models with a price in the run config), with what it would have cost
    without batch mode and without prompt caching."""
    if report.cost is None or report.cost.is_empty():
        return []
    table = Table(title="Cost per model × environment (USD; prices from the run config) and without batch mode / caching",
                  title_justify="left")
    for col in ("model", "env", "episodes", "successful", "cache hit %", "batched %", "cost", "per episode", "per success",
                "without batch", "without caching", "without both", "saved %"):
        table.add_column(col, justify="left" if col in ("model", "env") else "right")
    for r in report.cost.iter_rows(named=True):
        table.add_row(r["model"] or "?", r["env"] or "", _num(r["episodes"]), _num(r["successful_episodes"]), pct(r["cache_hit_share"]),
                      pct(r["batched_share"]), _usd(r["cost_usd"]), _usd(r["cost_per_episode_usd"]), _usd(r["cost_per_success_usd"]),
                      _usd(r["cost_no_batch_usd"]), _usd(r["cost_no_cache_usd"]), _usd(r["cost_list_usd"]), pct(r["saved_share"]))
    return [table]


def _usd(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def operations_tables(report: Report) -> list[Table]:
    usage = Table(title="Model calls: tokens, cost, prompt cache hits (share of input tokens read from the cache), latency (ms)",
                  title_justify="left")
    for col in ("model", "caller", "requests", "attempts", "retries", "failed", "tokens in", "tokens out", "cache hit %", "cost USD",
                "p50", "p90", "p99", "max"):
        usage.add_column(col, justify="left" if col in ("model", "caller") else "right")
    for r in report.usage.iter_rows(named=True):
        cost = "no price" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"
        usage.add_row(_model(r) if r["model"] else "?", r["caller"], _num(r["requests"]), _num(r["attempts"]), _num(r["retries"]),
                      _num(r["failed_attempts"]), _num(r["input_tokens"]), _num(r["output_tokens"]), pct(r.get("cache_hit_share")), cost,
                      ms(r["latency_p50_ms"]), ms(r["latency_p90_ms"]), ms(r["latency_p99_ms"]), ms(r["latency_max_ms"]))
    statuses = Table(title="HTTP attempts per status (none = no HTTP answer: timeout or reset; cancelled = abandoned at Ctrl-C)",
                     title_justify="left")
    for col in ("model", "HTTP status", "attempts", "retries", "failed", "mean Retry-After s", "example error"):
        statuses.add_column(col, overflow="fold")
    for r in report.statuses.iter_rows(named=True):
        answer = str(r["http_status"]) if r["http_status"] is not None else "cancelled" if r.get("no_answer") == "cancelled" else "none"
        statuses.add_row(r["model"] or "?", answer, _num(r["attempts"]),
                         _num(r["retries"]), _num(r["failed"]), _num(r["mean_retry_after_s"], 1), _short(r["example_error"], 60))
    rate = Table(title="Calls per second of wall-clock time (calls / the runs' duration, idle time included)", title_justify="left")
    for col in ("model", "calls", "run time", "calls/s", "peak calls/s", "busy (a call in flight)", "first call", "last call"):
        rate.add_column(col, justify="left" if col in ("model", "first call", "last call") else "right")
    for r in (report.rates if report.rates is not None else pl.DataFrame()).iter_rows(named=True):
        per_s = "–" if r["calls_per_s"] is None else f"{r['calls_per_s']:.2f}" if r["calls_per_s"] < 10 else f"{r['calls_per_s']:,.0f}"
        rate.add_row(r["model"] or "?", _num(r["calls"]), duration(r["run_seconds"]), per_s, _num(r["peak_calls_per_s"]),
                     duration(r.get("busy_s")), moment(r["first_call_at"]), moment(r["last_call_at"]))
    tables = [usage, *cost_tables(report), statuses, rate]
    if report.reasoning is not None and not report.reasoning.is_empty():
        thinking = Table(title="Reasoning per model × environment (tokens the server reported as thinking; replies cut by the "
                               "output budget)", title_justify="left")  # fmt: skip
        for col in ("model", "env", "caller", "calls", "tokens out", "reasoning tokens", "reasoning %", "turns with thinking",
                    "output budget exhausted", "context window hits"):
            thinking.add_column(col, justify="left" if col in ("model", "env", "caller") else "right")
        for r in report.reasoning.iter_rows(named=True):
            share = "" if r["reasoning_share"] is None else f"{100 * r['reasoning_share']:.0f}"
            thinking.add_row(r["model"] or "?", r["env"] or "", r["caller"], _num(r["answered_calls"]), _num(r["output_tokens"]),
                             _num(r["reasoning_tokens"]), share, _num(r["turns_with_reasoning"]), _num(r["output_budget_exhausted"]),
                             _num(r["context_window_hits"]))
        tables.append(thinking)
    return tables


def print_table(console: Console, table: Table, keys: int = 2) -> None:
    """Print ``table`` (its title as a line above it) so that nothing is cut at the console's width."""
    for part in fit_table(console, table, keys):
        if part.title:
            console.print(f"[bold]{part.title}[/]", highlight=False)
            part.title = None
        console.print(part)


def fit_table(console: Console, table: Table, keys: int = 2) -> list[Table]:
    """``table`` as is if every header and cell word fits the console's width; else compact (no vertical rules);
    else split into several compact tables, each repeating the first ``keys`` columns."""
    every = list(range(len(table.columns)))
    full = _copy(table, every, table.title, compact=False)
    if _min_width(console, full) <= console.width:
        return [_set_widths(console, full)]
    compact = _copy(table, every, table.title)
    if _min_width(console, compact) <= console.width or len(every) <= keys + 1:
        return [_set_widths(console, compact)]
    key_cols, groups, current = every[:keys], [], []  # type: ignore[var-annotated]
    for index in every[keys:]:
        if current and _min_width(console, _copy(table, [*key_cols, *current, index], None)) > console.width:
            groups.append(current)
            current = []
        current.append(index)
    groups.append(current)
    title = str(table.title) if table.title else ""
    return [_set_widths(console, _copy(table, [*key_cols, *group], f"{title} ({i}/{len(groups)})" if title else None))
            for i, group in enumerate(groups, 1)]  # fmt: skip


def _set_widths(console: Console, table: Table) -> Table:
    """When ``table`` is wider than the console, fix its column widths: each column its longest word, the room
    left shared in proportion to what each would like more (rich's own shrinking may cut words)."""
    lows = [col.min_width or 0 for col in table.columns]
    highs = [max(low, _longest_line(col.header), *(_longest_line(c) for c in col.cells)) for low, col in zip(lows, table.columns)]
    room = console.width - (_min_width(console, table) - sum(lows))  # the width the cells can have in all
    if sum(highs) <= room:
        return table
    spare, wants = room - sum(lows), [h - lo for lo, h in zip(lows, highs)]
    for col, low, want in zip(table.columns, lows, wants):
        col.width = low + (spare * want // sum(wants) if sum(wants) else 0)
    return table


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(cell).plain if isinstance(cell, str) else ""


def _longest_word(cell: Any) -> int:
    return max((cell_len(word) for word in _plain(cell).split()), default=0)


def _longest_line(cell: Any) -> int:
    return max((cell_len(line) for line in _plain(cell).splitlines()), default=0)


def _min_width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(100_000), table).minimum  # unclamped by the console


def _copy(table: Table, columns: Iterable[int], title: Any, compact: bool = True) -> Table:
    """A copy of ``table`` with only ``columns`` (rows, headers, alignment and styles kept), compact (no vertical
    rules) or in its own box; each column is at least as wide as its longest word, so rich never cuts one."""
    cols = [table.columns[i] for i in columns]
    if compact:
        out = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                    collapse_padding=True)  # fmt: skip
    else:
        out = Table(title=title, title_justify="left", box=table.box, show_edge=table.show_edge, padding=table.padding)
    cells = [list(col.cells) for col in cols]
    for col, column_cells in zip(cols, cells):
        out.add_column(col.header, justify=col.justify, style=col.style, overflow=col.overflow, no_wrap=col.no_wrap,
                       min_width=max(_longest_word(c) for c in [col.header, *column_cells]))  # fmt: skip
    for row in zip(*cells):
        out.add_row(*row)
    return out


def print_settings(report: Report, console: Console) -> None:
    """The runs' result-deciding settings that are not AgentBench v0.2's (or that there are none)."""
    groups = report.deviation_groups()
    if all(not lines for _, lines in groups):
        if not report.plays_agentbench and not report.scores.is_empty():
            return  # only environments that are not AgentBench's: no paper to compare with
        console.print(f"Settings: {AGENTBENCH_SETTINGS} (history, turn caps, prompts, metrics, data, split).")
        return
    for run_ids, lines in groups:
        which = "" if len(groups) == 1 else f" (run {', '.join(run_ids)})"
        if not lines:
            console.print(f"Settings{which}: {AGENTBENCH_SETTINGS}.")
            continue
        console.print(f"[bold yellow]Settings that differ from AgentBench v0.2{which}:[/]")
        for line in lines:
            console.print(f"  [yellow]{line}[/]", highlight=False)


def render(report: Report, console: Console) -> None:
    """Print every table of the report."""
    episodes = int(report.class_counts["total"].sum() or 0)
    console.print(f"[bold]AgentBench report[/] — {counted(len(report.files), 'file')}: {escape(', '.join(report.files))}; "
                  f"{counted(report.runs.height, 'run')}, {counted(episodes, 'episode')}", highlight=False)
    for line in [*notes.run_state_lines(report.run_states, report.resume), *notes.attempt_lines(report.attempts),
                 *notes.unsolvable_lines(report.unsolvable)]:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    print_settings(report, console)
    if report.class_counts.is_empty():
        console.print("no finished episodes yet")
        return
    for line in notes.config_lines(report.configs, report.pooled):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    compared = report.compared.line() if report.compared is not None else None
    if compared:
        console.print(f"[bold yellow]{escape(compared)}[/]", highlight=False)
    print_table(console, scores_table(report))
    for line in notes.score_rule_lines(report.scores):
        console.print(f"  {escape(line)}", highlight=False)
    if not report.overall.is_empty():
        print_table(console, overall_table(report), keys=1)
    if compared and report.scores_all is not None and report.overall_all is not None:
        every = "all of each model's episodes, not compared: the models finished different tasks"
        print_table(console, scores_table(report, report.scores_all, f" — {every}"))
        if not report.overall_all.is_empty():
            print_table(console, overall_table(report, report.overall_all, f" — {every}"), keys=1)
    classes, paper = classes_table(report), paper_table(report)
    short = _min_width(console, classes) > console.width  # narrow: short class names on purpose, with a legend
    print_table(console, classes_table(report, short=True) if short else classes)
    for line in notes.solved_lines(report.solved):
        console.print(f"  {escape(line)}", highlight=False)
    if not report.paper.is_empty():  # AgentBench's environments only
        print_table(console, paper_table(report, short=True) if short else paper)
    if short:
        console.print(f"[dim]{CLASS_LEGEND}[/]", highlight=False)
    if not report.reasons.is_empty():
        print_reasons(report, console)
    print_behaviour(report, console)
    for table in repeats_tables(report):
        print_table(console, table)
    if not report.usage.is_empty():
        for table in operations_tables(report):
            print_table(console, table)
    for line in report.limit_lines or []:
        console.print(escape(line), highlight=False)
    for line in report.tool_hints or []:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)


def render_summary(report: Report, console: Console, path: str) -> None:
    """A short summary (scores per model x env, OA, the most common failure classes, solved episodes whose status
    word is not 'completed') and the commands to see more. A model with several configurations has a row for each."""
    for line in [*notes.run_state_lines(report.run_states, report.resume), *notes.attempt_lines(report.attempts),
                 *notes.unsolvable_lines(report.unsolvable)]:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    if report.class_counts.is_empty():
        console.print("no finished episodes yet")
        return
    envs = sorted(report.scores["env"].unique().to_list())
    oa = {shown(r): (f"{r['oa']:.2f}" if r["complete"] else f"{r['oa']:.2f} partial ({r['envs_run']}/8)")
          + (f", built-in {r['builtin_suites']}" if r.get("builtin_suites") else "") for r in report.overall.iter_rows(named=True)}  # fmt: skip
    with_oa = not report.overall.is_empty()  # AgentBench's environments on its tasks, or none: no OA column
    table = Table(title="Scores (%) per model and environment" + (", and the overall AgentBench score (OA)" if with_oa else ""),
                  title_justify="left")  # fmt: skip
    table.add_column("model")
    for env in envs:
        table.add_column(env, justify="right")
    if with_oa:
        table.add_column("OA", justify="right")
    cells: dict[str, dict[str, float | None]] = {}
    for r in report.scores.iter_rows(named=True):
        cells.setdefault(shown(r), {})[r["env"]] = r["score"]
    for name in sorted(cells):
        table.add_row(escape(name), *[pct(cells[name].get(env), 0) if env in cells[name] else "" for env in envs],
                      *([oa.get(name, "–")] if with_oa else []))  # fmt: skip
    if report.compared is not None and report.compared.line():
        console.print(f"[yellow]{escape(report.compared.line() or '')}[/]", highlight=False)
    print_table(console, table, keys=1)
    if any("partial" in text for text in oa.values()):
        console.print("partial OA: over the environments played only (N/8); the paper's OA averages all eight", highlight=False)
    if any("built-in" in text for text in oa.values()):
        console.print("built-in ENVS: those environments played the project's built-in suites, not AgentBench's tasks: "
                      "not the paper's OA", highlight=False)
    for line in notes.config_lines(report.configs, report.pooled):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    console.print("[bold]Most common failure classes[/] (episodes, share of the model's episodes)", highlight=False)
    totals: dict[str, dict[str, int]] = {}
    for r in report.class_counts.iter_rows(named=True):
        into = totals.setdefault(shown(r), dict.fromkeys((*FAILURE_CLASSES, "total"), 0))
        for c in (*FAILURE_CLASSES, "total"):
            into[c] += r[c]
    for name, t in sorted(totals.items()):
        failures = sorted(((t[c], c) for c in FAILURE_CLASSES if c != "completed_success" and t[c]), reverse=True)[:3]
        listed = ", ".join(f"{c.replace('_', ' ')} {n} ({pct(n / t['total'], 0)}%)" for n, c in failures) or "none"
        console.print(f"  {escape(name)}: {listed}", highlight=False)
    for line in notes.solved_lines(report.solved):
        console.print(f"  {escape(line)}", highlight=False)
    for line in report.tool_hints or []:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    quoted = path if " " not in path else f'"{path}"'
    console.print("[bold]See more:[/] every table; the same in the browser (failure classes -> episodes -> transcripts); "
                  "one episode's transcript", highlight=False)
    for command in (f"agentbench report {quoted}", f"agentbench view {quoted}", f"agentbench show {quoted} EPISODE_ID"):
        console.print(f"  {command}", soft_wrap=True, highlight=False, markup=False)  # never broken: copy and paste it
