"""One episode's transcript with its events (parsed actions, observations, errors) and model calls."""

from __future__ import annotations

import difflib
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..wording import moment
from .loading import ReportError, Results
from .run_settings import episode_differences
from .terminal import fit_table

_ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}


# an episode's stored rows with how the reports read its outcome (episode_outcomes.outcome_note), latest first
EPISODE_ROWS = ("SELECT e.*, o.outcome_note FROM episodes AS e LEFT JOIN episode_outcomes AS o USING (run_id, episode_id, source_file) "
                "WHERE e.episode_id = ? ORDER BY e.finished_at DESC NULLS LAST")


def status_text(ep: Mapping[str, Any]) -> str:
    """The status word with how it reads: ``completed (wrong)``, ``task_limit_exceeded (solved: ended at the round
    limit, as AgentBench)`` for a solved game whose upstream word is not 'completed'."""
    status = str(ep["status"])
    if status == "completed":
        return status + (" (success)" if ep.get("success") else " (wrong)")
    if ep.get("outcome_note"):
        return f"{status} (solved: {ep['outcome_note']})"
    return status


def env_text(ep: Mapping[str, Any], differs: Sequence[str] = ()) -> str:
    """``webshop (dev, builtin)``; what is not known (an episode still running) is left out, never printed as None.
    ``differs``: the run's settings that differ from AgentBench v0.2 for this environment, named after the label so
    that "official" never stands without them."""
    known = [str(v) for v in (ep.get("split"), ep.get("source")) if v]
    text = f"{ep['env']} ({', '.join(known)})" if known else str(ep["env"])
    return text + (f" — settings differ from AgentBench v0.2: {', '.join(differs)}" if differs else "")


def tokens_text(ep: Mapping[str, Any]) -> str | None:
    """``1,204/96`` (the agent's input/output tokens); None while the episode runs (not counted yet)."""
    if ep.get("input_tokens") is None and ep.get("output_tokens") is None:
        return None
    return f"{ep.get('input_tokens') or 0:,}/{ep.get('output_tokens') or 0:,}"


def turn_title(t: Mapping[str, Any]) -> str:
    """``turn 3 · assistant``, saying when the text is the environment's, not the model's (a transcript_turns row)."""
    if t["role"] == "assistant" and not t["by_model"]:
        return f"turn {t['turn']} · written by the environment, not the model (assistant role)"
    if t.get("injected"):
        return f"turn {t['turn']} · {t['role']}, set-up re-inserted by the environment"
    return f"turn {t['turn']} · {t['role']}"


def find_episode(res: Results, episode_id: str) -> pl.DataFrame:
    """The stored rows of ``episode_id`` (latest first; several when the episode was re-run on resume)."""
    rows = res.sql(EPISODE_ROWS, [episode_id])
    if rows.is_empty():
        ids = res.sql("SELECT DISTINCT episode_id FROM episodes UNION SELECT DISTINCT episode_id FROM live_turns")["episode_id"].to_list()
        close = difflib.get_close_matches(episode_id, ids, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; list them with: agentbench sql FILE \"SELECT episode_id, status FROM episodes\""
        raise ReportError(f"no episode {episode_id!r} in {', '.join(str(p) for p in res.paths)}{hint}")
    return rows


DETAILS_SHOWN = 600  # characters of episodes.details in the header (the rest: agentbench view, or SQL)


def render_episode(res: Results, episode_id: str, console: Console) -> None:
    live = res.sql("SELECT * FROM live_transcript_turns WHERE episode_id = ? ORDER BY run_id, seq", [episode_id])
    rows = find_episode(res, episode_id) if live.is_empty() else res.sql(EPISODE_ROWS, [episode_id])
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
    for key, value in (
        ("episode", ep["episode_id"]), ("run", ep["run_id"]), ("model", ep["model"]),
        ("env", env_text(ep, episode_differences(res, ep["run_id"], ep["env"]))),
        ("task", ep["task_id"]), ("repeat", ep["repeat"]), ("status", status_text(ep)), ("score", ep["score"]), ("turns", ep["n_turns"]),
        ("tokens in/out", tokens_text(ep)), ("action mode", ep["action_mode"]),
        ("started", moment(ep["started_at"])), ("finished", moment(ep["finished_at"])), ("error", ep["error"]),
    ):
        if value is not None:
            head.add_row(key, escape(str(value)))
    if ep.get("details") not in (None, "{}", "null"):
        details = ep["details"]
        try:
            details = json.dumps(json.loads(details), ensure_ascii=False)
        except (TypeError, ValueError):
            pass
        text = str(details)
        if len(text) > DETAILS_SHOWN:
            text = f"{text[:DETAILS_SHOWN]} … ({len(text):,} characters; all of it: agentbench view, or agentbench sql FILE " \
                   f"\"SELECT details FROM episodes WHERE episode_id = '{ep['episode_id']}'\")"
        head.add_row("details", escape(text))
    console.print(Panel(head, title="episode", expand=False))

    turns = res.sql("SELECT * FROM transcript_turns WHERE run_id = ? AND episode_id = ? AND source_file = ? ORDER BY seq",
                    [ep["run_id"], ep["episode_id"], ep["source_file"]])
    calls = res.sql("SELECT * FROM model_calls WHERE run_id = ? AND episode_id = ? AND source_file = ? ORDER BY turn, started_at, attempt",
                    [ep["run_id"], ep["episode_id"], ep["source_file"]])
    calls_by_turn: dict[int, list[dict]] = {}  # type: ignore[type-arg]
    for c in calls.iter_rows(named=True):
        calls_by_turn.setdefault(c["turn"], []).append(c)
    _render_turns(turns, calls_by_turn, console)


def _render_turns(turns: pl.DataFrame, calls_by_turn: dict[int, list[dict]], console: Console) -> None:  # type: ignore[type-arg]
    """Each message in a panel titled by its turn and author; the model's own replies with their events and calls."""
    shown_calls: set[int] = set()
    for t in turns.iter_rows(named=True):
        role = t["role"]
        parts: list[Text | Table] = []
        if t.get("reasoning"):  # the thinking separated from the reply (never parsed by the environment)
            thought = t["reasoning"]
            parts.append(Text("reasoning: " + (thought if len(thought) <= 3000 else thought[:3000] + " …"), style="dim italic"))
        environment = role == "assistant" and not t["by_model"] or bool(t.get("injected"))
        parts.append(Text(t["content"] or "", style="dim" if environment else ""))
        if t["tool_calls"]:
            parts.append(Text(f"tool calls: {t['tool_calls']}", style="yellow"))
        if t["by_model"]:
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
                parts += _calls_tables(console, calls_by_turn[t["turn"]])
        console.print(Panel(Group(*parts), title=escape(turn_title(t)), title_align="left",
                            border_style="dim" if environment else _ROLE_STYLE.get(role, "white")))
    rest = [c for turn, cs in sorted(calls_by_turn.items()) if turn not in shown_calls for c in cs]
    if rest:
        console.print(Panel(Group(*_calls_tables(console, rest)), title="model calls without a stored reply (failed, judge, or the last one)",
                            title_align="left", border_style="red"))


_PANEL_EDGES = 4  # a panel's border and padding, left and right


def _calls_tables(console: Console, calls: list[dict]) -> list[Table]:  # type: ignore[type-arg]
    """The calls table fitted to the inside of a panel: compact, or split repeating turn and caller; headers never cut."""
    inside = Console(width=max(40, console.width - _PANEL_EDGES), file=io.StringIO())
    tables = fit_table(inside, _calls_table(calls), keys=2)
    for table in tables[1:]:  # a split table's parts after the first need no repeated title line
        table.title = None
    return tables


def _calls_table(calls: list[dict]) -> Table:  # type: ignore[type-arg]
    """The attempts of a turn; the limit and error columns only when an attempt has one."""
    rows = []
    for c in calls:
        tokens = f"{c['input_tokens'] or 0:,}/{c['output_tokens'] or 0:,}" + (f" ({c['reasoning_tokens']:,})" if c.get("reasoning_tokens") else "")
        limit = f"{c['limit_kind']}: {c['limit_basis']}" if c.get("limit_kind") else ""
        rows.append({"turn": str(c["turn"]), "caller": c["caller"] or "", "model": escape(c["model"] or ""), "attempt": str(c["attempt"]),
                     "HTTP": "none" if c["http_status"] is None else str(c["http_status"]),
                     "latency ms": "" if c["latency_ms"] is None else f"{c['latency_ms']:,.0f}",
                     "tokens in/out (reasoning)" if any(x.get("reasoning_tokens") for x in calls) else "tokens in/out": tokens,
                     "finish": escape(c["finish_reason"] or ""), "limit": escape(limit[:160]), "error": escape((c["error"] or "")[:120])})
    columns = [k for k in rows[0] if k not in ("limit", "error") or any(r[k] for r in rows)] if rows else []
    table = Table(title="model calls", title_justify="left", show_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold", justify="right" if col in ("turn", "attempt", "HTTP", "latency ms") else "left")
    for r in rows:
        table.add_row(*(r[col] for col in columns))
    return table
