"""The viewer's pages as HTML, from what ``queries`` read (the charts are the HTML report's SVG ones)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..analytics import behaviour as behaviour_mod
from ..analytics.compare import Comparison, EnvComparison, class_matrix, p_is, p_text
from ..analytics.configs import shown, shown_in_full
from ..analytics.transcript import env_text, status_text, tokens_text, turn_title
from ..analytics.failures import FAILURE_CLASSES, INFRA_CLASSES, PAPER_COLUMNS, PAPER_TITLES, class_shares, shown_classes
from ..analytics.html_report import CLASS_COLORS
from ..analytics.run_settings import AGENTBENCH_SETTINGS
from ..analytics.svg import interval_bars, stacked_bars
from ..analytics.terminal import ms
from ..analytics.terminal import pct as percent
from ..wording import counted, duration
from . import queries as q
from .html import Markup, element, esc, fmt, join, link, note, table, url

FLIPS_SHOWN = 200



def _model(row: dict[str, Any]) -> Markup | str:
    """A row's model and configuration label; a label that cuts a long value shows it whole on hover."""
    full = shown_in_full(row)
    return element("span", shown(row), title=full) if full else shown(row)

def _file_no(files: Sequence[str], path: str) -> str:
    return str(files.index(path) + 1) if path in files else ""


def swatch(cls: str) -> Markup:
    color = CLASS_COLORS.get(cls, "#999")
    return Markup(f'<svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="{color}"/></svg>')


def badge(cls: str) -> Markup:
    return element("span", join([swatch(cls), " ", cls]), cls="badge", data_class=cls)


def _episode_href(run_id: str, episode_id: str, file_no: str = "") -> str:
    return url("/episode", {"id": episode_id, "run": run_id, "file": file_no})


# -- overview -------------------------------------------------------------------------------------
def overview(data: q.Overview, files: Sequence[str]) -> Markup:
    live = set(data.live_files)
    file_rows = [[f"#{i + 1}", f, "being written by a run: see Live" if f in live else "finished or stopped"] for i, f in enumerate(files)]
    parts = [element("h2", "Files"), table(["#", "file", "state"], file_rows, left=3, test_id="files")]
    runs = [[r["run_id"], r["created_at"], r["finished_at"], _run_state(r), r["command"], r["models"] or "", r["envs"] or "",
             r["episodes"], f"#{_file_no(files, r['source_file'])}"] for r in data.runs.iter_rows(named=True)]
    parts += [element("h2", "Runs"), table(["run", "created", "finished", "state", "command", "models", "envs", "episodes", "file"],
                                          runs, left=7, test_id="runs")]
    parts += [element("p", line, cls="warning", data_note="report") for line in data.notes]
    parts.append(element("h2", "Scores"))
    if data.scores.is_empty():
        parts.append(note("No finished episodes yet."))
        return join(parts)
    rows = []
    for r in data.scores.iter_rows(named=True):
        ci = "–" if r["ci_low"] is None else f"{percent(r['ci_low'])}–{percent(r['ci_high'])} ({r['ci_method']})"
        if r["ci_method"] == q.PENDING:
            ci = Markup('<span class="pending">bootstrap interval: computing…</span>')
        infra = r["env_errors"] + r["model_errors"] + r["cancelled"]
        cell = link(url("/episodes", {"model": r["model"], "env": r["env"], "config": r["config_id"] if r["config"] else ""}),
                    join([_model(r), f" · {r['env']}"]))
        rows.append([cell, r["metric"], percent(r["score"]), ci, r["n"], infra, r.get("settings") or AGENTBENCH_SETTINGS])
    parts.append(note("Mean episode score (%) over every episode, as the paper counts every sample: env_error, model_error "
                      "and cancelled episodes (infrastructure failures, re-run on resume) are in n as failures and counted "
                      "apart (agentbench report --denominator outcomes leaves them out). 95% interval: Wilson for 0/1 scores, "
                      "percentile bootstrap (2,000 resamples, fixed seed) otherwise."))
    parts.append(_settings(data.deviations))
    if data.compared:  # models unevenly done: compared on the tasks every one has finished
        parts.append(element("p", data.compared, cls="warning", data_note="compared"))
    parts.append(table(["model · env", "metric", "score %", "95% CI", "n", "infra (in n)", "settings"], rows, left=2, test_id="scores"))
    parts.append(Markup(interval_bars(
        [(f"{shown(r)} · {r['env']}", 100 * (r["score"] or 0.0), None if r["ci_low"] is None else 100 * r["ci_low"],
          None if r["ci_high"] is None else 100 * r["ci_high"]) for r in data.scores.iter_rows(named=True) if r["n"]],
        "Score per model × environment with 95% interval")))
    if not data.overall.is_empty():
        parts.append(element("h2", "Overall AgentBench score (OA)"))
        parts.append(table(["model", "OA", "which"], [[_model(r), f"{r['oa']:.2f}", r["label"]] for r in data.overall.iter_rows(named=True)],
                           test_id="overall"))
        parts.append(note("OA = mean over the environments of score (%) / weight⁻¹ with the paper's weights⁻¹ OS 10.8, DB 13.0, "
                          "KG 13.9, DCG 12.0, LTP 3.5, HH 13.0, WS 30.7, WB 11.6; a partial OA (not all eight environments) "
                          "is not comparable with the paper's."))
    if data.scores_all is not None and data.overall_all is not None:
        parts.append(element("h2", "Scores over all of each model's episodes"))
        parts.append(note("Not a comparison: the models finished different tasks (the tables above compare them on the tasks "
                          "every one has finished)."))
        oa = {shown(r): f"{r['oa']:.2f}" for r in data.overall_all.iter_rows(named=True)}
        parts.append(table(["model · env", "score %", "n", "infra (in n)", "OA of the model"],
                           [[join([_model(r), f" · {r['env']}"]), percent(r["score"]), r["n"],
                             r["env_errors"] + r["model_errors"] + r["cancelled"], oa.get(shown(r), "–")]
                            for r in data.scores_all.iter_rows(named=True)], left=1, test_id="scores-all"))  # fmt: skip
    parts += [element("p", line, cls="warning", data_note="hint") for line in data.hints]
    if data.limits:  # requests/min, tokens/min and in flight as configured or learned from the server (as report)
        parts.append(element("h2", "Request limits"))
        parts += [element("p", line, data_note="limits") for line in data.limits]
    return join(parts)


def _run_state(r: Mapping[str, Any]) -> str:
    """How a run ended, as the Runs table says it (a run writing its file now is live; one without an end was stopped)."""
    if r.get("live"):
        return "running: see Live"
    return {"interrupted": "interrupted (Ctrl-C): resume to finish", "not finished": "stopped without an end (killed?): resume "
            "to finish"}.get(r.get("state") or "", r.get("state") or "–")


def _settings(groups: list[tuple[list[str], list[str]]]) -> Markup:
    """The runs' differences from AgentBench v0.2 (the scores' "settings" column names them), as the report shows them."""
    if all(not lines for _, lines in groups):
        return note(f"Settings: {AGENTBENCH_SETTINGS}.")
    parts = []
    for run_ids, lines in groups:
        which = "" if len(groups) == 1 else f" (run {', '.join(run_ids)})"
        if not lines:
            parts.append(note(f"Settings{which}: {AGENTBENCH_SETTINGS}."))
            continue
        items = join([element("li", line) for line in lines])
        parts.append(element("div", join([element("strong", f"Settings that differ from AgentBench v0.2{which}:"), element("ul", items)]),
                             cls="warning", data_testid="deviations"))  # fmt: skip
    return join(parts)


# -- failures -------------------------------------------------------------------------------------
def _heat(share: float) -> str:
    return f"h{min(5, int(share * 5 + 0.999))}" if share > 0 else "h0"


def failures(data: q.FailureMatrix) -> Markup:
    if data.counts.is_empty():
        return note("No finished episodes yet.")
    classes = shown_classes(data.counts)
    headers = ["model", "env", *classes, "total"]
    rows = []
    for r in data.counts.iter_rows(named=True):
        cells: list[Any] = [_model(r), r["env"]]
        config = r["config_id"] if r["config"] else ""
        for cls in classes:
            n = r[cls]
            share = n / r["total"] if r["total"] else 0.0
            if n:
                href = url("/episodes", {"model": r["model"], "env": r["env"], "config": config, "status": cls})
                cells.append(Markup(f'<a class="cell {_heat(share)}" data-class="{cls}" href="{esc(href)}">{n}'
                                    f' <small>{percent(share, 0)}%</small></a>'))
            else:
                cells.append(Markup('<span class="zero">0</span>'))
        cells.append(link(url("/episodes", {"model": r["model"], "env": r["env"], "config": config}), r["total"]))
        rows.append(cells)
    head = Markup("".join(f"<th class=\"l\">{esc(h)}</th>" if i < 2 else
                          f"<th class=\"r\">{swatch(h) if h in CLASS_COLORS else ''} {esc(h.replace('_', ' '))}</th>"
                          for i, h in enumerate(headers)))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < 2 else "r"}">{esc(c) if not isinstance(c, Markup) else c}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    matrix = Markup(f'<table class="matrix" data-table="failure-matrix"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
    shares = class_shares(data.counts)
    chart = stacked_bars([(f"{shown(r)} · {r['env']}", {c: r[c] for c in FAILURE_CLASSES}) for r in shares.iter_rows(named=True)],
                         FAILURE_CLASSES, CLASS_COLORS, "Failure classes per model × environment (share of episodes)")
    paper_rows = [[_model(r), r["env"], *[percent(r[c]) for c in PAPER_COLUMNS], r["episodes"]] for r in data.paper.iter_rows(named=True)]
    return join([
        note(f"Every finished episode is in exactly one class; {', '.join(INFRA_CLASSES)} are not the model's fault. "
             "Click a cell for its episodes, an episode for its transcript."),
        matrix, *[element("p", line, cls="note", data_note="solved") for line in data.solved], Markup(chart),
        _behaviour(data.behaviour),
        _reasons(data.reasons),
        element("h2", "AgentBench paper convention (% of episodes)"),
        note("The paper's five columns, from the status upstream would have recorded: its Task Limit Exceeded also holds "
             "environment and API errors; cancelled episodes are left out."),
        table(["model", "env", *[PAPER_TITLES[c] for c in PAPER_COLUMNS], "episodes"], paper_rows, left=2, test_id="paper"),
    ])


def _reasons(frame: Any) -> Markup:
    """The most frequent reasons of each failure class (analytics.failures.top_reasons): the environment's label where it
    names one (what the parser saw and expected), each with an example episode and its last reply."""
    if frame.is_empty():
        return Markup("")
    rows = []
    for r in frame.iter_rows(named=True):
        example = (r["examples"] or [{}])[0]
        episode = link(url("/episode", {"id": example["episode_id"]}), example["episode_id"]) if example.get("episode_id") else ""
        rows.append([_model(r), r["env"], r["failure_class"].replace("_", " "), r["reason"], r["episodes"], episode,
                     (example.get("error") or "")[:200], (example.get("last_output") or "")[:200]])
    return join([element("h2", "Failure reasons (most frequent first, up to 3 a class)"),
                 note("The environment's own reason where it names one (what its parser saw and what it expected); the example "
                      "keeps the nearest match it found."),
                 table(["model", "env", "class", "reason", "episodes", "example", "its error", "its last reply"], rows, left=4,
                       test_id="reasons")])


def _behaviour(frame: Any) -> Markup:
    """How the episodes failed (analytics.behaviour): loops among task-limit episodes, recovery after a refused action,
    and example episodes linked to their transcripts."""
    if frame.is_empty():
        return Markup("")
    rows = []
    for r in frame.iter_rows(named=True):
        shown_examples = [join([link(_episode_href(e["run_id"], e["episode_id"]), f"{kind}: {e['episode_id']}"), " — ", e["evidence"]])
                          for kind, e in behaviour_mod.examples(r, per_kind=1)]
        rows.append([_model(r), r["env"], Markup(Markup("<br>").join(shown_examples)),
                     behaviour_mod.share_text(r["tle_looping"], r["tle_episodes"]), behaviour_mod.share_text(r["tle_stalled"], r["tle_episodes"]),
                     behaviour_mod.recovery_text(r)])
    return join([element("h2", "How episodes failed"), note(behaviour_mod.NOTE + " Click an example for its transcript."),
                 table(["model", "env", "examples", "task limit, looping", "task limit, stalled", "recovered after a refused action"],
                       rows, left=3, test_id="behaviour")])


# -- episodes -------------------------------------------------------------------------------------
def _select(name: str, label: str, options: Sequence[tuple[str, str]], chosen: str) -> Markup:
    opts = "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(t)}</option>' for v, t in options)
    return Markup(f'<label>{esc(label)} <select name="{name}">{opts}</select></label>')


def _input(name: str, label: str, value: str, size: int = 12) -> Markup:
    return Markup(f'<label>{esc(label)} <input name="{name}" value="{esc(value)}" size="{size}"></label>')


def episodes(data: q.EpisodePage, *, form: bool = True) -> Markup:
    """The episode list; ``form=False`` (a static export: no server to filter) names the list's filters instead of the form."""
    f = data.filters
    everything = [("", "all")]
    fields = [
        _select("model", "model", everything + [(m, m) for m in data.models], f.model),
        _select("env", "env", everything + [(e, e) for e in data.envs], f.env),
        _select("status", "status", everything + [(s, s) for s in data.statuses] +
                ([(f.status, f.status)] if f.status and f.status not in data.statuses else []), f.status),
        _input("task", "task", f.task, 10), _input("repeat", "repeat", f.repeat, 3), _input("q", "text", f.q, 24),
        _select("sort", "sort", [(k, k) for k in q.SORTS], f.sort),
    ]
    if data.configs:  # several deciding configurations: each row of the scores is one of them
        fields.insert(3, _select("config", "configuration", everything + data.configs, f.config))
    if len(data.files) > 1:
        fields.insert(0, _select("file", "file", everything + [(str(i + 1), f"#{i + 1}") for i in range(len(data.files))], f.file))
    if form:
        head = Markup(f'<form class="filters" method="get" action="/episodes">{join(fields)}<button>Filter</button> '
                      f'{link("/episodes", "clear")}</form>')
    else:
        chosen = [f"{k} {v}" for k, v in (("file", f"#{f.file}" if f.file else ""), ("model", f.model), ("env", f.env),
                                          ("configuration", dict(data.configs).get(f.config, f.config[:8])), ("status", f.status)) if v]
        head = element("p", join(["Episodes of ", " · ".join(chosen) if chosen else "every model and environment", " (",
                                  link("/episodes", "all episodes"), ")"]), cls="filters")
    pager = [f"{counted(data.total, 'episode')} {'matches' if data.total == 1 else 'match'}"]
    if data.pages > 1:
        pager.append(f" · page {f.page} of {data.pages} ")
        if f.page > 1:
            pager.append(link(url("/episodes", f.params(page=f.page - 1)), "‹ previous"))
        if f.page < data.pages:
            pager += [" ", link(url("/episodes", f.params(page=f.page + 1)), "next ›", cls="next")]
    multi = len(data.files) > 1
    rows = []
    for r in data.rows.iter_rows(named=True):
        no = _file_no(data.files, r["source_file"])
        row = [link(_episode_href(r["run_id"], r["episode_id"], no if multi else ""), r["episode_id"], cls="episode"),
               r["task_id"], r["repeat"], badge(r["failure_class"]), r["score"], r["n_turns"], r["error"] or "", r["finished_at"]]
        rows.append(([f"#{no}"] if multi else []) + row)
    headers = (["file"] if multi else []) + ["episode", "task", "repeat", "class", "score", "turns", "error", "finished"]
    return join([head, element("p", join(pager), cls="pager"),
                 table(headers, rows, left=len(headers) - 4, cls="episodes", test_id="episodes")])


# -- one episode ------------------------------------------------------------------------------------
def _dl(items: Sequence[tuple[str, Any]]) -> Markup:
    return Markup("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v) if isinstance(v, Markup) else esc(fmt(v))}</dd>"
                                   for k, v in items if v is not None) + "</dl>")


def _calls(calls: Sequence[Mapping[str, Any]], title: str) -> Markup:
    rows = []
    for c in calls:
        tokens = f"{c['input_tokens'] or 0}/{c['output_tokens'] or 0}" + (f" ({c['reasoning_tokens']})" if c.get("reasoning_tokens") else "")
        limit = f"{c['limit_kind']}: {c['limit_basis']}" if c.get("limit_kind") else ""
        rows.append([c["caller"] or "agent", c["model"] or "", c["turn"], c["attempt"],
                     "none" if c["http_status"] is None else str(c["http_status"]),
                     "" if c["latency_ms"] is None else f"{c['latency_ms']:.0f}", c.get("retry_after_s"), tokens,
                     c["finish_reason"] or "", limit, c["error"] or ""])
    retries = sum(1 for c in calls if c["attempt"] > 1)
    caption = f"{title}: {len(calls)} attempt{'s' if len(calls) != 1 else ''}" + (f", {retries} retr{'ies' if retries != 1 else 'y'}" if retries else "")
    return join([element("div", caption, cls="calls-title"),
                 table(["caller", "model", "turn", "attempt", "HTTP", "latency ms", "Retry-After s", "tokens in/out (reasoning)", "finish",
                        "limit", "error"], rows, left=2, cls="calls", test_id="calls")])


def transcript(data: q.Transcript, files: Sequence[str]) -> Markup:
    ep = data.episode
    status = status_text(ep)
    if data.state == "running":
        status = "running: its turns so far (this page shows them as of its loading; reload for more)"
    elif data.state == "unfinished":
        status = "unfinished: the run that wrote these turns stopped before the episode ended; a resume re-runs it"
    head = _dl([("episode", ep["episode_id"]), ("run", ep["run_id"]), ("file", ep["source_file"]), ("model", ep["model"]),
                ("env", env_text(ep, data.differs)), ("task", ep["task_id"]), ("repeat", ep["repeat"]),
                ("status", Markup(f'<span class="status" data-status="{esc(ep["status"])}">{esc(status)}</span>')),
                ("paper status", ep.get("paper_status")), ("score", ep["score"]), ("turns", ep["n_turns"]),
                ("tokens in/out", tokens_text(ep)), ("action mode", ep.get("action_mode")),
                ("started", ep["started_at"]), ("finished", ep["finished_at"]), ("error", ep["error"])])
    parts = [head]
    if ep.get("details") not in (None, "{}", "null"):
        try:
            details = json.dumps(json.loads(ep["details"]), ensure_ascii=False, indent=1)
        except (TypeError, ValueError):
            details = str(ep["details"])
        parts.append(Markup(f"<details><summary>details</summary><pre>{esc(details[:20000])}</pre></details>"))
    if data.others:
        links = [link(_episode_href(o["run_id"], o["episode_id"], _file_no(files, o["source_file"])),
                      f"{o['status']} in run {o['run_id']} ({fmt(o['finished_at'])})") for o in data.others]
        parts.append(element("p", join(["Other attempts of this episode (an attempt replaced on resume, or another file): ",
                                        *[x for pair in zip(links, [", "] * len(links)) for x in pair][:-1]]), cls="note"))
    agent = [c for c in data.calls if (c["caller"] or "agent") == "agent"]
    by_turn: dict[int, list[Mapping[str, Any]]] = {}
    for c in agent:
        by_turn.setdefault(c["turn"], []).append(c)
    shown: set[int] = set()
    for t in data.turns:
        parts.append(_turn(t, by_turn.get(t["turn"], []) if t["by_model"] and t["turn"] not in shown else []))
        if t["by_model"]:
            shown.add(t["turn"])
    rest = [c for c in agent if c["turn"] not in shown]
    if rest:
        parts.append(element("section", _calls(rest, "Model calls without a stored reply (failed, or the last one)"), cls="turn orphan"))
    judge = [c for c in data.calls if (c["caller"] or "agent") != "agent"]
    if judge:
        parts.append(element("section", _calls(judge, "Judge calls"), cls="turn judge", data_section="judge"))
    return join(parts)


def _turn(t: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]) -> Markup:
    role = t["role"]
    mine = "yes" if t["by_model"] else "no"
    parts = [element("div", turn_title(t), cls="turn-head")]
    if t.get("reasoning"):
        parts.append(Markup(f'<details class="reasoning"><summary>reasoning</summary><pre>{esc(t["reasoning"])}</pre></details>'))
    parts.append(element("pre", t["content"] or "", cls="content"))
    if t.get("tool_calls"):
        parts.append(element("pre", f"tool calls: {t['tool_calls']}", cls="tool-calls"))
    if t["by_model"]:
        valid = None if t["valid"] is None else Markup('<span class="ok">valid</span>' if t["valid"] else '<span class="bad">invalid</span>')
        parts.append(_dl([("action", t["action"]), ("validity", valid), ("error", t["error"]), ("observation", t["observation"])]))
        if calls:
            parts.append(_calls(calls, "HTTP attempts"))
    injected = role == "assistant" and not t["by_model"] or bool(t.get("injected"))
    return element("section", join(parts), cls=f"turn role-{role}" + (" injected" if injected else ""), data_turn=t["turn"],
                   data_role=role, data_by_model=mine)


# -- live -----------------------------------------------------------------------------------------
def live(data: Sequence[q.FileLive], files: Sequence[str], now: str) -> Markup:
    parts = [note(f"Updated {now}; this page refreshes itself every 2 seconds.")]
    for f in data:
        fig = f.figures
        stored = sum(s.done for s in f.streams)
        done = stored  # a stopped file's streams count what a resume keeps, out of what its runs planned
        total = sum(s.total or 0 for s in f.streams)
        if f.running:
            state = f"running (run {fig['run_id']}, {duration(fig['elapsed_s'])} so far, writer seen {fig['age_s']:.0f} s ago)"
        elif fig["stopped"]:
            state = "not running, and not finished: a resume (the same command) completes it"
        else:
            state = "not running: every episode in the file is shown"
        parts.append(element("h2", f"#{_file_no(files, f.path)} {f.path}"))
        parts.append(element("p", state, cls="state", data_running="yes" if f.running else "no"))
        parts += [element("p", line, cls="warning", data_note="stopped") for line in f.stopped]
        cost = "no price" if fig["cost_usd"] is None else f"${fig['cost_usd']:.4f}"
        eta = duration(fig["eta_s"]) if f.running else f"stopped: {counted(fig['rerun'], 'episode')} to re-run" if fig["stopped"] else "done"
        rate = fig["calls_per_s"]
        figures = [("episodes done", f"{done:,}/{total:,}"), ("calls/s", "–" if rate is None else f"{rate:.2f}" if rate < 10 else f"{rate:,.0f}"),
                   ("HTTP attempts", fig["calls"]), ("retries", fig["retries"]), ("HTTP 429", fig["http_429"]),
                   ("failed attempts", fig["errors"]), ("tokens in/out", f"{fig['input_tokens']:,}/{fig['output_tokens']:,}"),
                   ("cost (finished episodes)", cost), ("ETA", eta)]
        figures[-1:-1] = _spend_figures(fig.get("spend")) if f.running else []
        parts.append(Markup('<div class="figures">' + "".join(
            f'<div class="figure" data-figure="{esc(k)}"><div class="k">{esc(k)}</div><div class="v">{esc(fmt(v, 2))}</div></div>'
            for k, v in figures) + "</div>"))
        rows = []
        for s in f.streams:
            top = s.total if s.total is not None else s.done
            bar = Markup(f'<progress max="{max(top, 1)}" value="{s.done}"></progress>')
            counts = join(Markup(f'{badge(k)} {v} ') for k, v in sorted(s.statuses.items(), key=lambda kv: -kv[1]))
            cell = link(url("/episodes", {"model": s.model, "env": s.env, "file": _file_no(files, f.path) if len(files) > 1 else ""}),
                        f"{s.model} · {s.env}")
            rows.append([cell, f"{s.done:,}/{top:,}", bar, s.in_flight, counts])
        parts.append(table(["model · env", "done/total", "progress", "in flight", "statuses"], rows, left=1, cls="streams",
                           test_id="streams"))
        usage = [[_model(r) if r["model"] else None, r["caller"], r["requests"], r["attempts"], r["retries"], r["input_tokens"], r["output_tokens"],
                  "no price" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}", ms(r["latency_p50_ms"]), ms(r["latency_p90_ms"])]
                 for r in f.usage.iter_rows(named=True)]
        if usage:
            parts.append(element("h3", "Model calls of the finished episodes (HTTP attempts above count every call so far)"))
            parts.append(table(["model", "caller", "requests", "attempts", "retries", "tokens in", "tokens out", "cost USD",
                                "p50 ms", "p90 ms"], usage, left=2, test_id="usage"))
        if f.in_progress_total:
            no = _file_no(files, f.path) if len(files) > 1 else ""
            shown_rows = [[link(_episode_href(r["run_id"], r["episode_id"], no), r["episode_id"], cls="episode"), r["turns"], r["last_at"]]
                          for r in f.in_progress.iter_rows(named=True)]
            title = "Episodes in progress" if f.running else "Unfinished episodes (their run stopped; a resume re-runs them)"
            parts.append(element("h3", f"{title}: {f.in_progress_total:,} (latest {len(shown_rows)} shown)"))
            parts.append(table(["episode", "turns so far", "last turn at"], shown_rows, test_id="in-progress"))
    return element("div", join(parts), id="live")


def _spend_figures(spend: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """A running run's spend (every answered call, earlier invocations included), its cap and the projection to the end."""
    if not spend:
        return []
    if spend.get("cost_usd") is not None:
        cap = f" of ${spend['cap_usd']:g}" if spend.get("cap_usd") is not None else ""
        projected = spend.get("projected_usd")
        return [("spent (all calls)", f"${spend['cost_usd']:.4f}{cap}"), ("projected", "–" if projected is None else f"${projected:.4f}")]
    cap = f" of {spend['cap_tokens']:,}" if spend.get("cap_tokens") is not None else ""
    projected = spend.get("projected_tokens")
    return [("tokens so far", f"{spend['tokens']:,}{cap}"), ("projected tokens", "–" if projected is None else f"{projected:,}")]


# -- compare --------------------------------------------------------------------------------------
def compare(data: q.CompareView, allow: bool) -> Markup:
    multi = len(data.files) > 1
    fields = []
    for side, fi, chosen in (("a", data.fa, data.a), ("b", data.fb, data.b)):
        if multi:
            fields.append(_select(f"f{side}", f"{side.upper()} file", [(str(i + 1), f"#{i + 1}") for i in range(len(data.files))], str(fi + 1)))
        models = sorted({s.model for sides in data.sides for s in sides})
        fields.append(_select(f"m{side}", f"{side.upper()} model", [(m, m) for m in models], chosen.model if chosen else ""))
        configs = [s for s in data.sides[fi] if chosen and s.model == chosen.model]
        if len(configs) > 1:  # the model has several configurations in that file: one of them, never pooled
            fields.append(_select(f"c{side}", f"{side.upper()} configuration", [(s.config_id, s.config) for s in configs],
                                  chosen.config_id if chosen else ""))
    parts = [Markup(f'<form class="filters" method="get" action="/compare">{join(fields)}<button>Compare</button></form>')]
    if data.message:
        parts.append(note(data.message))
        return join(parts)
    result = data.result
    assert result is not None and data.a is not None and data.b is not None
    if data.conflicts:
        what = "; ".join(data.conflicts)
        if data.a.model == data.b.model:
            parts.append(note(f"One model in two configurations: A and B differ in {what}."))
        elif not allow:
            query = {"fa": data.fa + 1 if multi else "", "ma": data.ma, "ca": data.a.config_id, "fb": data.fb + 1 if multi else "",
                     "mb": data.mb, "cb": data.b.config_id, "allow": 1}
            parts.append(element("p", join([f"The runs of A ({data.a.name}) and B ({data.b.name}) differ in result-deciding settings "
                                            f"({what}), so their episodes are not comparable. ", link(url("/compare", query), "Compare anyway")]),
                                 cls="warning"))
            return join(parts)
        else:
            parts.append(element("p", f"Warning: comparing runs with different result-deciding settings ({what}).", cls="warning"))
    parts.append(_compare_table(result))
    t = result.total
    verdict = "significant" if t.mcnemar_p < 0.05 else "not significant"
    extra = []
    if result.infra_pairs:
        extra.append(f"{counted(result.infra_pairs, 'pair')} left out (infrastructure failure on a side)")
    if result.only_a or result.only_b:
        extra.append(f"{counted(result.only_a, 'episode')} only in A, {result.only_b:,} only in B (not paired)")
    parts.append(element("p", f"{counted(t.pairs, 'pair')}: {counted(t.a_only, 'task')} only A solved, {t.b_only:,} only B solved; "
                              f"the success difference is {verdict} at 5% (exact McNemar {p_is(t.mcnemar_p)}; Wilcoxon signed-rank "
                              f"on scores {p_is(t.wilcoxon.p_value)}). " + "; ".join(extra), cls="verdict"))
    parts.append(_class_changes(data, result))
    parts.append(_flips(data, result))
    return join(parts)


def _class_changes(data: q.CompareView, result: Comparison) -> Markup:
    """The failure-class changes between A and B: a matrix A class x B class, each cell linking its example pair."""
    changes = result.class_changes
    if changes is None or changes.is_empty():
        return note("No paired episode changed failure class.")
    rows, cols, cells = class_matrix(changes)
    examples = {(r["class_a"], r["class_b"]): r for r in changes.iter_rows(named=True)}
    multi = len(data.files) > 1

    def cell(a: str, b: str) -> Any:
        if (a, b) not in cells:
            return ""
        r = examples[(a, b)]
        href = url("/episode", {"id": f"{data.ma}/{r['example']}", "run": r["example_run_a"], "file": data.fa + 1 if multi else ""})
        return link(href, f"{cells[(a, b)]:,}")

    total = int(changes["episodes"].sum())
    return join([element("h2", f"Failure-class changes ({counted(total, 'pair')})"),
                 note("Paired episodes whose failure class differs: A's class (rows) x B's class (columns); a count links A's "
                      "episode of the first such pair."),
                 table(["A \\ B", *cols], [[a, *[cell(a, b) for b in cols]] for a in rows], test_id="class-changes")])


def _compare_table(result: Comparison) -> Markup:
    def row(e: EnvComparison) -> list[Any]:
        return [e.env, e.pairs, e.success_a, e.success_b, e.a_only, e.b_only, p_text(e.mcnemar_p), percent(e.mean_a), percent(e.mean_b),
                p_text(e.wilcoxon.p_value)]

    envs = [*result.per_env, result.total] if len(result.per_env) > 1 else result.per_env
    return join([element("h2", f"A = {result.label_a}  vs  B = {result.label_b}"),
                 note("Paired on (env, split, task, repeat); pairs with an infrastructure failure on a side are left out. "
                      "ok = successes; McNemar: exact test on success; Wilcoxon: signed-rank test on scores."),
                 table(["env", "pairs", "A ok", "B ok", "A only", "B only", "McNemar p", "A mean %", "B mean %", "Wilcoxon p"],
                       [row(e) for e in envs], test_id="compare")])


def _flips(data: q.CompareView, result: Comparison) -> Markup:
    if result.flips.is_empty():
        return note("No task flipped.")
    multi = len(data.files) > 1
    rows = []
    for r in result.flips.head(FLIPS_SHOWN).iter_rows(named=True):
        tail = f"{r['env']}/{r['split']}/{r['task_id']}/{r['repeat']}"
        a = link(url("/episode", {"id": f"{data.ma}/{tail}", "run": r["run_a"], "file": data.fa + 1 if multi else ""}), r["class_a"])
        b = link(url("/episode", {"id": f"{data.mb}/{tail}", "run": r["run_b"], "file": data.fb + 1 if multi else ""}), r["class_b"])
        rows.append([r["env"], r["task_id"], r["repeat"], a, b, r["direction"], r["score_a"], r["score_b"]])
    shown = min(FLIPS_SHOWN, result.flips.height)
    return join([element("h2", f"Tasks that flipped ({result.flips.height:,}; first {shown} shown)"),
                 table(["env", "task", "repeat", "A class", "B class", "who did better", "A score", "B score"], rows, left=6,
                       test_id="flips")])


# -- SQL ------------------------------------------------------------------------------------------
SQL_EXAMPLE = "SELECT model, env, failure_class, count(*) AS episodes\nFROM episode_outcomes\nGROUP BY ALL ORDER BY ALL"


@dataclass(frozen=True)
class CsvForm:
    """Where the SQL page's download button posts, the server's token it carries, and the download's bounds."""

    action: str
    token: str
    max_rows: int
    max_bytes: int

    def render(self, query: str) -> Markup:
        return Markup(f'<form class="csv" method="post" action="{esc(self.action)}"><input type="hidden" name="q" value="{esc(query)}">'
                      f'<input type="hidden" name="token" value="{esc(self.token)}"><button class="link">download CSV</button></form>')


def sql(query: str, answer: q.SqlAnswer | None, error: str, tables: Sequence[tuple[str, str]], csv: CsvForm) -> Markup:
    parts = [Markup('<form class="sql" method="get" action="/sql">'
                    f'<textarea name="q" rows="6" cols="100" spellcheck="false">{esc(query or SQL_EXAMPLE)}</textarea>'
                    "<div><button>Run</button> <span class=\"note\">read-only: one SELECT (or DESCRIBE/SHOW/SUMMARIZE) "
                    "over the tables and views below; no file or network access.</span></div></form>")]
    if error:
        parts.append(element("p", error, cls="error"))
    if answer is not None:
        bound = f"up to {csv.max_rows:,} rows, {csv.max_bytes / (1 << 20):g} MiB"
        more = f" (first {len(answer.rows):,} shown; the CSV has {bound})" if answer.truncated else ""
        parts.append(element("div", join([f"{len(answer.rows):,} row{'s' if len(answer.rows) != 1 else ''}{more} · ",
                                          csv.render(query)]), cls="note"))
        parts.append(table(answer.columns, [[fmt(v) if not isinstance(v, str) else v for v in r] for r in answer.rows],
                           left=len(answer.columns), cls="sql-result", test_id="sql"))
    parts.append(element("h2", "Tables and views"))
    parts.append(table(["name", "columns"], [[n, c] for n, c in tables], left=2, cls="schema"))
    return join(parts)


def error_page(message: str) -> Markup:
    return element("p", message, cls="error")
