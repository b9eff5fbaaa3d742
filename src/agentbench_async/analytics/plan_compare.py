"""The plan beside the spend: ``agentbench plan`` saves its figures next to the run's file (``<out>.plan.json``, with the
configuration's fingerprint); ``report`` puts them side by side with what the run of that configuration used (the
``episode_costs`` view: every call of its episodes, the judge's included) and the difference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import ConfigError
from .loading import Results

PLAN_SUFFIX = ".plan.json"


def plan_path(out: Path) -> Path:
    """Where ``agentbench plan`` saves the plan of a run writing ``out`` (``runs/x.duckdb`` -> ``runs/x.plan.json``)."""
    return out.with_suffix(PLAN_SUFFIX)


def read_plan(out: Path) -> dict[str, Any] | None:
    """The plan saved for ``out``, or None (none made, or unreadable: the report goes on without it)."""
    try:
        plan = json.loads(plan_path(out).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return plan if isinstance(plan, dict) and isinstance(plan.get("rows"), list) else None


def save_plan(plan: dict[str, Any], out: Path) -> str:
    """Save ``plan`` (``Plan.as_dict()``) beside ``out``; the line saying where. A plan of a resume (episodes already
    done) leaves the saved plan of the same configuration in place: report compares the whole run's plan."""
    path = plan_path(out)
    earlier = read_plan(out)
    if any(r.get("already_done") for r in plan["rows"]) and earlier is not None and earlier.get("fingerprint") == plan.get("fingerprint"):
        return f"plan of the episodes left not saved: {path} keeps the plan of the whole run (agentbench report {out} compares it)"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"plan: cannot write {path} ({exc.strerror or exc}); give another --out") from None
    return f"plan saved to {path} (agentbench report {out} puts it beside what the run used)"


def plan_vs_spend(res: Results, out: Path) -> list[dict[str, Any]] | None:
    """Per model x environment of the plan saved for ``out``: planned tokens and USD (expected, worst case) beside what
    the run of the same configuration used; None when no plan was made for a configuration in the file."""
    plan = read_plan(out)
    if plan is None:
        return None
    fingerprint = plan.get("fingerprint")
    used = res.sql(
        "SELECT e.model, e.env, count(*) AS episodes, coalesce(sum(e.input_tokens + e.output_tokens), 0)::BIGINT AS tokens, "
        "sum(e.cost_usd)::DOUBLE AS cost_usd FROM episode_costs AS e JOIN runs AS r USING (run_id) "
        f"WHERE r.fingerprint = '{_quoted(str(fingerprint))}' GROUP BY ALL"
    ).rows(named=True)
    if not used:
        return None
    spent = {(u["model"], u["env"]): u for u in used}
    rows = []
    for p in plan["rows"]:
        u = spent.get((p["model"], p["env"]), {})
        planned = float(p["expected_tokens"]) + float(p.get("judge_expected_tokens") or 0)
        worst = float(p["worst_tokens"]) + float(p.get("judge_worst_tokens") or 0)
        tokens = u.get("tokens")
        rows.append({
            "model": p["model"], "env": p["env"], "planned_episodes": p["episodes"], "episodes": u.get("episodes", 0),
            "planned_tokens": planned, "worst_tokens": worst, "tokens": tokens,
            "tokens_diff_share": None if not tokens or not planned else planned / float(tokens) - 1,
            "planned_usd": p.get("expected_usd"), "worst_usd": p.get("worst_usd"), "cost_usd": u.get("cost_usd"),
            "basis": p.get("basis"),
        })  # fmt: skip
    return rows


def _quoted(text: str) -> str:
    return text.replace("'", "''")


def print_plan_vs_spend(rows: list[dict[str, Any]], console: Console) -> None:
    """The plan-versus-spend table of ``report``."""
    from .terminal import print_table

    table = Table(title="Plan vs spend (agentbench plan's expected and worst case beside what the run used)", title_justify="left")
    for col in ("model", "env", "episodes", "planned tokens", "used tokens", "difference", "worst tokens", "planned USD", "used USD"):
        table.add_column(col, justify="left" if col in ("model", "env") else "right")
    for r in rows:
        table.add_row(*plan_cells(r))
    print_table(console, table, keys=2)
    console.print("difference: planned / used - 1 (positive: the plan expected more)", markup=False, highlight=False)


def plan_cells(r: dict[str, Any]) -> list[str]:
    """A row of the plan-versus-spend table as text (the terminal's and the HTML report's)."""
    diff = r["tokens_diff_share"]
    return [r["model"], r["env"], f"{r['episodes']:,}/{r['planned_episodes']:,}", f"{r['planned_tokens']:,.0f}",
            "-" if r["tokens"] is None else f"{r['tokens']:,.0f}", "-" if diff is None else f"{100 * diff:+.1f}%",
            f"{r['worst_tokens']:,.0f}", _usd(r["planned_usd"]), _usd(r["cost_usd"])]  # fmt: skip


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"
