"""One episode's transcript with its events (parsed actions, observations, errors) and model calls."""

from __future__ import annotations

import difflib
import json

import polars as pl
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .loading import ReportError, Results

_ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}


def find_episode(res: Results, episode_id: str) -> pl.DataFrame:
    """The stored rows of ``episode_id`` (latest first; several when the episode was re-run on resume)."""
    rows = res.sql("SELECT * FROM episodes WHERE episode_id = ? ORDER BY finished_at DESC NULLS LAST", [episode_id])
    if rows.is_empty():
        ids = res.sql("SELECT DISTINCT episode_id FROM episodes UNION SELECT DISTINCT episode_id FROM live_turns")["episode_id"].to_list()
        close = difflib.get_close_matches(episode_id, ids, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; list them with: agentbench sql FILE \"SELECT episode_id, status FROM episodes\""
        raise ReportError(f"no episode {episode_id!r} in {', '.join(str(p) for p in res.paths)}{hint}")
    return rows


def render_episode(res: Results, episode_id: str, console: Console) -> None:
    live = res.sql("SELECT * FROM live_turns WHERE episode_id = ? ORDER BY run_id, seq", [episode_id])
    rows = find_episode(res, episode_id) if live.is_empty() else res.sql(
        "SELECT * FROM episodes WHERE episode_id = ? ORDER BY finished_at DESC NULLS LAST", [episode_id])  # fmt: skip
    if not live.is_empty():
        _render_unfinished(res, live, console)
    for i, ep in enumerate(rows.iter_rows(named=True)):
        if i or not live.is_empty():
            console.rule("[dim]an earlier attempt of the same episode (replaced on resume)[/]")
        _render_one(res, ep, console)


def _render_unfinished(res: Results, live: pl.DataFrame, console: Console) -> None:
    """The turns so far of an episode that has not finished (``live_turns``)."""
    first = live.row(0, named=True)
    status = res.live_status()
    running = status is not None and first["run_id"] == status.run_id
    state = "running: turns so far, shown as they complete" if running else \
        "unfinished: the run that wrote these turns stopped before the episode ended; a resume re-runs and replaces it"
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for key, value in (("episode", first["episode_id"]), ("run", first["run_id"]), ("model", first["model"]), ("env", first["env"]),
                       ("status", state), ("turns", int(live["turn"].max() or 0))):  # fmt: skip
        head.add_row(key, escape(str(value)))
    console.print(Panel(head, title="episode (not finished)", expand=False, border_style="yellow"))
    _render_turns(live, {}, console)


def _render_one(res: Results, ep: dict, console: Console) -> None:  # type: ignore[type-arg]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    status = ep["status"]
    if status == "completed":
        status += " (success)" if ep["success"] else " (wrong)"
    for key, value in (
        ("episode", ep["episode_id"]), ("run", ep["run_id"]), ("model", ep["model"]), ("env", f"{ep['env']} ({ep['split']}, {ep['source']})"),
        ("task", ep["task_id"]), ("repeat", ep["repeat"]), ("status", status), ("score", ep["score"]), ("turns", ep["n_turns"]),
        ("tokens in/out", f"{ep['input_tokens']}/{ep['output_tokens']}"), ("action mode", ep["action_mode"]),
        ("started", ep["started_at"]), ("finished", ep["finished_at"]), ("error", ep["error"]),
    ):
        if value is not None:
            head.add_row(key, escape(str(value)))
    if ep.get("details") not in (None, "{}", "null"):
        details = ep["details"]
        try:
            details = json.dumps(json.loads(details), ensure_ascii=False)
        except (TypeError, ValueError):
            pass
        head.add_row("details", escape(str(details)[:600]))
    console.print(Panel(head, title="episode", expand=False))

    turns = res.sql("SELECT * FROM turns WHERE run_id = ? AND episode_id = ? ORDER BY seq", [ep["run_id"], ep["episode_id"]])
    calls = res.sql("SELECT * FROM model_calls WHERE run_id = ? AND episode_id = ? ORDER BY turn, started_at, attempt",
                    [ep["run_id"], ep["episode_id"]])
    calls_by_turn: dict[int, list[dict]] = {}  # type: ignore[type-arg]
    for c in calls.iter_rows(named=True):
        calls_by_turn.setdefault(c["turn"], []).append(c)
    _render_turns(turns, calls_by_turn, console)


def _render_turns(turns: pl.DataFrame, calls_by_turn: dict[int, list[dict]], console: Console) -> None:  # type: ignore[type-arg]
    shown_calls: set[int] = set()
    for t in turns.iter_rows(named=True):
        role = t["role"]
        parts: list[Text | Table] = []
        if t.get("reasoning"):  # the thinking separated from the reply (never parsed by the environment)
            thought = t["reasoning"]
            parts.append(Text("reasoning: " + (thought if len(thought) <= 3000 else thought[:3000] + " …"), style="dim italic"))
        parts.append(Text(t["content"] or ""))
        if t["tool_calls"]:
            parts.append(Text(f"tool calls: {t['tool_calls']}", style="yellow"))
        if role == "assistant":
            ev = Table.grid(padding=(0, 1))
            ev.add_column(style="dim")
            ev.add_column()
            if t["action"] is not None:
                ev.add_row("action", escape(t["action"]))
            if t["valid"] is not None:
                ev.add_row("valid", "yes" if t["valid"] else "[red]no[/]")
            if t["error"]:
                ev.add_row("error", f"[red]{escape(t['error'])}[/]")
            if t["observation"] is not None:
                obs = t["observation"]
                ev.add_row("observation", escape(obs if len(obs) <= 1500 else obs[:1500] + " …"))
            parts.append(ev)
            if t["turn"] not in shown_calls and t["turn"] in calls_by_turn:
                shown_calls.add(t["turn"])
                parts.append(_calls_table(calls_by_turn[t["turn"]]))
        console.print(Panel(Group(*parts), title=f"turn {t['turn']} · {role}", title_align="left",
                            border_style=_ROLE_STYLE.get(role, "white")))
    rest = [c for turn, cs in sorted(calls_by_turn.items()) if turn not in shown_calls for c in cs]
    if rest:
        console.print(Panel(_calls_table(rest), title="model calls without a stored reply (failed, judge, or the last one)",
                            title_align="left", border_style="red"))


def _calls_table(calls: list[dict]) -> Table:  # type: ignore[type-arg]
    table = Table(title="model calls", title_justify="left", show_edge=False)
    for col in ("turn", "caller", "model", "attempt", "HTTP", "latency ms", "tokens in/out (reasoning)", "finish", "limit", "error"):
        table.add_column(col)
    for c in calls:
        tokens = f"{c['input_tokens'] or 0}/{c['output_tokens'] or 0}" + (f" ({c['reasoning_tokens']})" if c.get("reasoning_tokens") else "")
        limit = f"{c['limit_kind']}: {c['limit_basis']}" if c.get("limit_kind") else ""
        table.add_row(str(c["turn"]), c["caller"] or "", c["model"] or "", str(c["attempt"]),
                      "none" if c["http_status"] is None else str(c["http_status"]),
                      "" if c["latency_ms"] is None else f"{c['latency_ms']:.0f}",
                      tokens, c["finish_reason"] or "", escape(limit[:160]), escape((c["error"] or "")[:120]))
    return table
