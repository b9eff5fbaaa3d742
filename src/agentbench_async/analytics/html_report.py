"""One self-contained HTML file: the report's tables and inline-SVG plots (no CDN, no JavaScript)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

import polars as pl

from ..wording import counted, duration
from . import behaviour, configs, notes
from .configs import shown
from .failures import FAILURE_CLASSES, INFRA_CLASSES, PAPER_COLUMNS, PAPER_TITLES, shown_classes
from .plan_compare import plan_cells
from .report import Report
from .run_settings import AGENTBENCH_SETTINGS
from .svg import PALETTE, histogram, interval_bars, line_chart, stacked_bars
from .terminal import ms, pct

CLASS_COLORS: dict[str, str] = {
    "completed_success": "#3ca951",
    "completed_wrong": "#9c6b4e",
    "context_limit_exceeded": "#a463f2",
    "invalid_format": "#ff725c",
    "invalid_action": "#efb118",
    "task_limit_exceeded": "#4269d0",
    "episode_limit_exceeded": "#97bbf5",
    "env_error": "#8a8a8a",
    "model_error": "#b5b5b5",
    "cancelled": "#dcdcdc",
}

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px} h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3} td.l,th.l{text-align:left} td.l{white-space:nowrap} table.wrap td.l{white-space:normal;overflow-wrap:anywhere}
.note{color:#555;font-size:13px;max-width:900px} .infra{color:#777}
.deviations{background:#fff6e0;border:1px solid #e8c060;padding:6px 12px;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:12px} .mono{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap}
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 2, css: str = "") -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{"l" if i < left else ""}">{escape("" if v is None else str(v))}</td>' for i, v in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _settings_section(report: Report) -> str:
    groups = report.deviation_groups()
    if all(not lines for _, lines in groups):
        if not report.plays_agentbench and not report.scores.is_empty():
            return ""  # only environments that are not AgentBench's: no paper to compare with
        return f"<p class=\"note\">Settings: {AGENTBENCH_SETTINGS} (history, turn caps, prompts, metrics, data, split).</p>"
    parts = []
    for run_ids, lines in groups:
        which = "" if len(groups) == 1 else f" (run {escape(', '.join(run_ids))})"
        if not lines:
            parts.append(f"<p class=\"note\">Settings{which}: {AGENTBENCH_SETTINGS}.</p>")
            continue
        items = "".join(f"<li>{escape(line)}</li>" for line in lines)
        parts.append(f'<div class="deviations"><strong>Settings that differ from AgentBench v0.2{which}:</strong><ul>{items}</ul></div>')
    return "".join(parts)


def _scores_section(report: Report) -> str:
    line = report.compared.line() if report.compared is not None else None
    compared = f'<p class="deviations"><strong>{escape(line)}</strong></p>' if line else ""
    return f"<h2>Scores</h2>{compared}{_scores_tables(report, report.scores, report.overall)}{_every_episode(report) if line else ''}"


def _every_episode(report: Report) -> str:
    """Each model's scores and OA over all its episodes, when the comparison above was made on the common tasks."""
    if report.scores_all is None or report.overall_all is None:
        return ""
    return ("<h3>Scores over all of each model's episodes</h3><p class=\"note\">Not a comparison: the models finished "
            "different tasks.</p>" + _scores_tables(report, report.scores_all, report.overall_all, plot=False, notes_too=False))


def _scores_tables(report: Report, scores: pl.DataFrame, overall_rows: pl.DataFrame, *, plot: bool = True, notes_too: bool = True) -> str:
    rows = []
    for r in scores.iter_rows(named=True):
        ci = "–" if r["ci_low"] is None else f"{pct(r['ci_low'])}–{pct(r['ci_high'])} ({r['ci_method']})"
        rows.append([shown(r), r["env"], r["metric"], pct(r["score"]), ci, r["n"], r["env_errors"], r["model_errors"], r["cancelled"],
                     r.get("settings") or AGENTBENCH_SETTINGS])
    table = _table(["model", "env", "metric", "score %", "95% CI", "n", "env_error", "model_error", "cancelled", "settings"], rows, left=3)
    bars = interval_bars(
        [(f"{shown(r)} · {r['env']}", 100 * (r["score"] or 0.0), None if r["ci_low"] is None else 100 * r["ci_low"],
          None if r["ci_high"] is None else 100 * r["ci_high"]) for r in scores.iter_rows(named=True) if r["n"]],
        "Score per model × environment with 95% interval",
    ) if plot else ""
    overall = ""
    if not overall_rows.is_empty():
        overall = "<h3>Overall AgentBench score</h3>" + _table(
            ["model", "which", "OA"], [[shown(r), r["label"], f"{r['oa']:.2f}"] for r in overall_rows.iter_rows(named=True)]
        ) + ('<p class="note">OA = mean over the environments of score (%) / weight⁻¹ with the paper\'s weights⁻¹ '
             "OS 10.8, DB 13.0, KG 13.9, DCG 12.0, LTP 3.5, HH 13.0, WS 30.7, WB 11.6. A partial OA averages only the "
             "environments that were run and is not comparable with the paper's.</p>")
    counted = ("over every episode, as the paper counts every sample: env_error, model_error and cancelled episodes "
               "(infrastructure failures, re-run on resume) are in n as failures and counted apart"
               if report.denominator == "paper" else "over the model's own outcomes; env_error, model_error and cancelled "
               "episodes are not in n (they are infrastructure failures, re-run on resume; --denominator outcomes)")
    note = (f'<p class="note">Each environment\'s metric is the mean of the episode scores {counted}. '
            "Intervals: Wilson for 0/1 scores, percentile bootstrap (2000 resamples, fixed seed) otherwise.</p>")
    configured = "".join(f'<p class="deviations">{escape(line)}</p>'
                         for line in notes.config_lines(report.configs, report.pooled, whole=False))
    configured += "".join(f'<p class="note">{escape(line)}</p>' for line in notes.score_rule_lines(report.scores))
    if not notes_too:
        return f"{table}{overall}"
    return f"{note}{configured}{_configurations(report)}{table}{bars}{overall}"


def _configurations(report: Report) -> str:
    """The settings table of the labelled configurations: each row's short label and every setting that differs."""
    rows = configs.configurations_shown(report.configs) if report.configs is not None and not report.pooled else []
    if not rows:
        return ""
    return ('<h3>Configurations</h3><p class="note">A row label names the fewest settings that tell a model\'s '
            "configurations apart (long values cut); here is every setting in which they differ, whole.</p>"
            + _table(["model", "label", "every setting that differs", "runs"], rows, left=4, css="wrap"))


def _failure_section(report: Report) -> str:
    counts = report.class_counts
    classes = shown_classes(counts)
    rows = []
    for r in counts.iter_rows(named=True):
        rows.append([shown(r), r["env"], *[f"{r[c]} ({pct(r[c] / r['total'] if r['total'] else None, 0)}%)" for c in classes],
                     r["total"]])
    table = _table(["model", "env", *[c.replace("_", " ") for c in classes], "total"], rows)
    shares = report.class_shares
    plot = stacked_bars(
        [(f"{shown(r)} · {r['env']}", {c: r[c] for c in FAILURE_CLASSES}) for r in shares.iter_rows(named=True)],
        FAILURE_CLASSES, CLASS_COLORS, "Failure classes per model × environment (share of episodes)",
    )
    paper_rows = [[shown(r), r["env"], *[pct(r[c]) for c in PAPER_COLUMNS], r["episodes"]] for r in report.paper.iter_rows(named=True)]
    solved = "".join(f'<p class="note">{escape(line)}</p>' for line in notes.solved_lines(report.solved))
    paper = _table(["model", "env", *[PAPER_TITLES[c] for c in PAPER_COLUMNS], "episodes"], paper_rows)
    infra = ", ".join(INFRA_CLASSES)
    paper_part = "" if report.paper.is_empty() else (  # AgentBench's environments only
        "<h3>AgentBench paper convention (% of episodes)</h3>"
        '<p class="note">The paper\'s five columns: its Task Limit Exceeded also holds unknown/task errors (here env_error '
        "and model_error); cancelled episodes are left out. Use it only to compare with the paper's tables.</p>"
        f"{paper}"
    )
    return (
        "<h2>Failure classes</h2>"
        f'<p class="note">Every finished episode is in exactly one class; {infra} are not the model\'s fault.</p>'
        f"{table}{solved}{plot}{paper_part}"
    )


def _behaviour_section(report: Report) -> str:
    if report.behaviour is None or report.behaviour.is_empty():
        return ""
    rows = []
    for r in report.behaviour.iter_rows(named=True):
        shown_examples = "; ".join(f"{kind}: {e['episode_id']} ({e['evidence']})" for kind, e in behaviour.examples(r, per_kind=1))
        rows.append([shown(r), r["env"], behaviour.share_text(r["tle_looping"], r["tle_episodes"]),
                     behaviour.share_text(r["tle_stalled"], r["tle_episodes"]),
                     behaviour.recovery_text(r), shown_examples])
    return ("<h2>How episodes failed</h2>"
            f'<p class="note">{escape(behaviour.NOTE)} See one episode with <code>agentbench show FILE EPISODE_ID</code> '
            "or click through in <code>agentbench view</code>.</p>"
            + _table(["model", "env", "task limit, looping", "task limit, stalled", "recovered after a refused action", "examples"],
                     rows, left=6, css="wrap"))


def _reasons_section(report: Report) -> str:
    if report.reasons.is_empty():
        return ""
    rows = []
    for r in report.reasons.iter_rows(named=True):
        examples = r["examples"] or []
        ids = ", ".join(e["episode_id"] for e in examples)
        out = (examples[0].get("last_output") or "")[:200] if examples else ""
        turns = f"{r['turns_min']}/{r['turns_median']}/{r['turns_max']}"
        rows.append([shown(r), r["env"], r["failure_class"], r["reason"], r["episodes"], turns, ids, out])
    return ("<h2>Top failure reasons</h2>"
            '<p class="note">Errors with numbers replaced by N and long quoted text by \'…\'; turns min/median/max = model turns used. '
            "See one episode with <code>agentbench show FILE EPISODE_ID</code>.</p>"
            + _table(["model", "env", "class", "reason", "episodes", "turns", "example episodes", "last output (truncated)"], rows, left=8,
                     css="wrap"))


def _turns_section(report: Report) -> str:
    if report.turns_used.is_empty():
        return ""
    plots = []
    used = configs.with_labels(report.turns_used, report.configs) if report.configs is not None else report.turns_used
    grouped = used.group_by("model", "env", "config", "n_turns").agg(pl.col("episodes").sum())
    for (model, env, label), g in grouped.sort("model", "env", "config").group_by(["model", "env", "config"], maintain_order=True):
        counts = {int(k): int(v) for k, v in zip(g["n_turns"].to_list(), g["episodes"].to_list()) if k is not None}
        plots.append(histogram(counts, f"Turns used: {shown({'model': model, 'config': label})} · {env}"))
    return "<h2>Turns used per episode</h2><div class=\"grid\">" + "".join(plots) + "</div>"


def _repeats_section(report: Report) -> str:
    if report.pass_k.is_empty():
        return ""
    rows = [[shown(r), r["env"], r["k"], r["tasks"], pct(r["pass_at_k"]), pct(r["pass_hat_k"]), r["infra"]]
            for r in report.pass_k.iter_rows(named=True)]
    spread = [[shown(r), r["env"], r["repeats"], pct(r["mean_score"]), pct(r["stddev"]), pct(r["min_score"]), pct(r["max_score"]),
               r["infra"]] for r in report.spread.iter_rows(named=True)]
    infra = "infra (in n)" if report.denominator == "paper" else "infra excluded"
    note = ("every try counts, an env_error, model_error or cancelled one as a failed try (as the scores)" if report.denominator == "paper"
            else "over the model's own outcomes: env_error, model_error and cancelled tries are left out (--denominator outcomes)")
    return (f'<h2>Repeats</h2><p class="note">pass@k, pass^k and the spread: {note}.</p>'
            + _table(["model", "env", "k", "tasks", "pass@k %", "pass^k %", infra], rows)
            + _table(["model", "env", "repeats", "mean %", "stddev %", "min %", "max %", infra], spread))


def _reasoning_table(report: Report) -> str:
    if report.reasoning is None or report.reasoning.is_empty():
        return ""
    rows = [[r["model"], r["env"], r["caller"], r["answered_calls"], r["output_tokens"], r["reasoning_tokens"],
             None if r["reasoning_share"] is None else f"{100 * r['reasoning_share']:.0f}", r["turns_with_reasoning"],
             r["output_budget_exhausted"], r["context_window_hits"]] for r in report.reasoning.iter_rows(named=True)]
    return ("<h3>Reasoning per model × environment</h3>"
            + _table(["model", "env", "caller", "calls", "tokens out", "reasoning tokens", "reasoning %", "turns with thinking",
                      "output budget exhausted", "context window hits"], rows, left=3))


def _cost_table(report: Report) -> str:
    if report.cost is None or report.cost.is_empty():
        return ""

    def usd(v: float | None) -> str | None:
        return None if v is None else f"{v:.4f}"

    def share(v: float | None) -> str | None:
        return None if v is None else f"{100 * v:.0f}"

    rows = [[r["model"], r["env"], r["episodes"], r["successful_episodes"], share(r["cache_hit_share"]), share(r["batched_share"]),
             usd(r["cost_usd"]), usd(r["cost_per_episode_usd"]), usd(r["cost_per_success_usd"]), usd(r["cost_no_batch_usd"]),
             usd(r["cost_no_cache_usd"]), usd(r["cost_list_usd"]), share(r["saved_share"])] for r in report.cost.iter_rows(named=True)]
    return ("<h3>Cost per model × environment (USD)</h3>"
            + _table(["model", "env", "episodes", "successful", "cache hit %", "batched %", "cost", "per episode", "per success",
                      "without batch", "without caching", "without both", "saved %"], rows, left=2))


def _operations_section(report: Report) -> str:
    if report.usage.is_empty():
        return ""
    usage = [[shown(r) if r["model"] else None, r["caller"], r["requests"], r["attempts"], r["retries"], r["failed_attempts"], r["input_tokens"],
              r["output_tokens"], None if r.get("cache_hit_share") is None else f"{100 * r['cache_hit_share']:.0f}",
              "no price" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
              *[ms(r[c]) for c in ("latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms")]]
             for r in report.usage.iter_rows(named=True)]
    statuses = [[r["model"], r["http_status"] if r["http_status"] is not None else "cancelled" if r.get("no_answer") == "cancelled" else "none", r["attempts"], r["retries"], r["failed"],
                 None if r["mean_retry_after_s"] is None else f"{r['mean_retry_after_s']:.1f}", r["example_error"] or ""]
                for r in report.statuses.iter_rows(named=True)]
    rates = [[r["model"] or "?", r["calls"], duration(r["run_seconds"]), None if r["calls_per_s"] is None else f"{r['calls_per_s']:.2f}",
              r["peak_calls_per_s"], duration(r.get("busy_s"))] for r in (report.rates if report.rates is not None else pl.DataFrame()).iter_rows(named=True)]
    series: dict[str, list[tuple[float, float]]] = {}
    rate: dict[str, list[tuple[float, float]]] = {}
    tp = report.throughput
    if not tp.is_empty():
        t0 = tp["second"].min()
        for r in tp.iter_rows(named=True):
            x = (r["second"] - t0).total_seconds()
            name = r["model"] or "?"
            series.setdefault(name, []).append((x, r["latency_p50_ms"] or 0.0))
            rate.setdefault(name, []).append((x, float(r["calls"])))
    return (
        "<h2>Operations</h2>"
        + _table(["model", "caller", "requests", "attempts", "retries", "failed", "tokens in", "tokens out", "cache hit %", "cost USD",
                  "p50 ms", "p90 ms", "p99 ms", "max ms"], usage)
        + '<p class="note">Cost = tokens × the model\'s price per 1M tokens (price_in, price_cached_in, price_cache_write, '
          "price_out in the run config, or report --price MODEL=IN,OUT), less the batch discount for batched calls; cache hit % = "
          "input tokens read from the provider's prompt cache.</p>"
        + _cost_table(report)
        + _table(["model", "HTTP status", "attempts", "retries", "failed", "mean Retry-After s", "example error"], statuses, left=1)
        + "<h3>Calls per second of wall-clock time</h3>"
        + _table(["model", "calls", "run time", "calls/s", "peak calls/s", "busy (a call in flight)"], rates, left=1)
        + '<p class="note">calls/s = calls / the wall-clock duration of the runs that made them (idle time included); busy = '
          "the time at least one call was in flight (the union of the calls' intervals).</p>"
        + _reasoning_table(report)
        + line_chart(series, "Latency over time (median per second)", "seconds since the first call", "latency ms")
        + line_chart(rate, "Calls per second over time", "seconds since the first call", "calls/s").replace(
            'data-plot="latency"', 'data-plot="calls-per-second"')
    )


def _plan_section(planned: Mapping[str, list[dict[str, Any]]]) -> str:
    """agentbench plan's figures beside what the run used (plan_compare.plan_vs_spend), per result file."""
    parts = ["<h2>Plan vs spend</h2>", '<p class="note">agentbench plan\'s expected and worst-case tokens and USD beside what '
             "the run of the same configuration used; difference: planned / used - 1.</p>"]
    for rows in planned.values():
        parts.append(_table(["model", "env", "episodes", "planned tokens", "used tokens", "difference", "worst tokens", "planned USD",
                             "used USD"], [plan_cells(r) for r in rows]))
    return "".join(parts)


def render_html(report: Report, planned: Mapping[str, list[dict[str, Any]]] | None = None) -> str:
    runs = [[r["run_id"], r["created_at"], r["command"], r["version"], r["episodes"], r["source_file"]]
            for r in report.runs.iter_rows(named=True)]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<title>AgentBench report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>AgentBench report</h1>",
        f'<p class="note">Generated {generated} from {counted(len(report.files), "file")}: {escape(", ".join(report.files))}.</p>',
        _table(["run", "created", "command", "version", "episodes", "file"], runs, left=6),
        *[f'<p class="deviations">{escape(line)}</p>' for line in [*notes.run_state_lines(report.run_states, report.resume), *notes.attempt_lines(report.attempts),
                                                                    *notes.unsolvable_lines(report.unsolvable)]],
        _settings_section(report),
    ]
    if report.class_counts.is_empty():
        parts.append("<p>No finished episodes yet.</p>")
    else:
        parts += [_scores_section(report), _failure_section(report), _reasons_section(report), _behaviour_section(report), _turns_section(report),
                  _repeats_section(report), _operations_section(report)]
        parts += [f'<p class="deviations">{escape(line)}</p>' for line in report.tool_hints or []]
    if planned:
        parts.append(_plan_section(planned))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Report, path: Path, planned: Mapping[str, list[dict[str, Any]]] | None = None) -> None:
    """The report as one HTML file; ``planned``: per result file, agentbench plan's figures beside the spend."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, planned), encoding="utf-8")


__all__ = ["CLASS_COLORS", "PALETTE", "render_html", "write_html"]
