"""Operations: tokens, cost (analytics/60_cost.sql), prompt caching, latency percentiles, HTTP statuses and
retries, calls per second, how the runs ended, and the tools-mode hint."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ..wording import duration
from .loading import Results

Prices = Mapping[str, tuple[float, float]]  # model -> USD per 1M input, output tokens


def usage_table(res: Results, prices: Prices | None = None) -> pl.DataFrame:
    """The ``call_usage`` view with ``cost_usd``: what the calls were billed, from the ``call_costs`` view
    (prices in the run config, cached input and batch discount applied; None when a model has no price).

    ``prices`` (USD per 1M input/output tokens per model name, e.g. given on a command line) replace a model's
    configured ``price_in``/``price_out`` (its cached-input and cache-write prices become ``price_in``).
    """
    usage = res.call_usage.sort("model", "caller", "config_id")
    overrides = list((prices or {}).items())
    values = " UNION ALL ".join("SELECT ?::VARCHAR AS model, ?::DOUBLE AS p_in, ?::DOUBLE AS p_out" for _ in overrides)
    params = [v for name, (p_in, p_out) in overrides for v in (name, p_in, p_out)]
    costs = res.sql(
        f"""
        WITH o AS ({values or "SELECT NULL::VARCHAR AS model, NULL::DOUBLE AS p_in, NULL::DOUBLE AS p_out WHERE false"})
        SELECT k.model, k.caller, k.config_id,
               sum(CASE WHEN o.model IS NULL THEN k.cost_usd
                        ELSE token_cost_usd(k.input_tokens - k.cache_read_tokens - k.cache_write_tokens, k.cache_read_tokens,
                                            k.cache_write_tokens, k.output_tokens, o.p_in, NULL, NULL, o.p_out) * (1 - k.batch_discount)
                   END) AS cost_usd
        FROM call_costs AS k LEFT JOIN o ON o.model = k.model
        GROUP BY ALL
        """,
        params,
    )
    return usage.join(costs, on=["model", "caller", "config_id"], how="left", nulls_equal=True)


def cost_table(res: Results) -> pl.DataFrame:
    """Cost per model x environment (the ``cost_by_model_env`` view): episodes and successful episodes, tokens,
    cache hit share, batched share, cost, cost per episode and per successful episode, and what the same calls
    would have cost without batch mode, without prompt caching and without either; empty when no model has a
    price in the run config."""
    frame = res.cost_by_model_env
    return frame.filter(pl.col("cost_list_usd").is_not_null()).sort("model", "env", nulls_last=True)


def status_table(res: Results) -> pl.DataFrame:
    """Attempts, retries and failures per model and HTTP status."""
    return res.http_statuses.sort("model", "http_status", nulls_last=True)


def reasoning_table(res: Results) -> pl.DataFrame:
    """Thinking per model x environment x caller (the ``reasoning_usage`` view); empty when no model
    thought (no reasoning tokens or text, no reply cut by the output budget)."""
    frame = res.reasoning_usage
    shown = frame.filter(
        (pl.col("reasoning_tokens").fill_null(0) > 0) | (pl.col("turns_with_reasoning") > 0) | (pl.col("output_budget_exhausted") > 0)
    )
    return shown.sort("model", "env", "caller", nulls_last=True)


def throughput_table(res: Results) -> pl.DataFrame:
    """Calls per second over time per model (one row per wall-clock second with calls)."""
    return res.calls_per_second.sort("model", "second")


def run_states(res: Results) -> pl.DataFrame:
    """The ``run_states`` view with ``live``: the run is writing its file right now (its snapshot is what was read),
    so a 'not finished' run is either live or was stopped without recording its end (killed)."""
    states = res.run_states.sort("created_at")
    live_runs = {status.run_id for status in (res.live_status(p) for p in res.live_files) if status is not None}
    return states.with_columns(pl.col("run_id").is_in(list(live_runs)).alias("live"))


def tool_call_hints(res: Results) -> list[str]:
    """One line per model whose tools-mode replies carried no tool_calls but a call written out as JSON in the
    text (the ``tools_mode_replies`` view): the server probably does not fill tool_calls, and how to check."""
    frame = res.tools_mode_replies
    if frame.is_empty():
        return []
    per_model = frame.group_by("model").agg(pl.col("replies").sum(), pl.col("without_tool_calls").sum(), pl.col("json_like_calls").sum())
    lines = []
    for r in per_model.filter(pl.col("json_like_calls") > 0).sort("model").iter_rows(named=True):
        lines.append(
            f"hint: {r['model']}: {r['json_like_calls']:,} of its {r['replies']:,} replies in tools mode had no tool_calls but JSON "
            "that looks like a call in their text: its server may not support tool calls (llama.cpp needs --jinja, vLLM "
            "--enable-auto-tool-choice --tool-call-parser, llama-cpp-python a function-calling chat format); check by sending it "
            "one request with 'tools' and looking for message.tool_calls in the reply, or use --action-mode text"
        )
    return lines


def waiting_hints(res: Results) -> list[str]:
    """One line per model x environment whose time limits counted in model time (card_game: AgentBench's 300 s a
    decision, 600 s a game) were hit mostly waiting in the server's queue (``details.queued_seconds`` over half of
    ``details.model_seconds``): the losses say more about the server's load than about the model."""
    frame = res.sql(
        "SELECT model, env, count(*) AS episodes, sum(q) AS queued, sum(m) AS spent FROM ("
        "  SELECT model, env, TRY_CAST(json_extract(details, '$.queued_seconds') AS DOUBLE) AS q,"
        "         TRY_CAST(json_extract(details, '$.model_seconds') AS DOUBLE) AS m FROM episode_outcomes"
        "  WHERE json_extract_string(details, '$.forfeit_cause') = 'time_limit' OR json_extract_string(details, '$.end_reason') = 'killed'"
        ") WHERE m > 0 AND q > 0.5 * m GROUP BY ALL ORDER BY model, env"
    )
    return [f"hint: {r['model']} · {r['env']}: {r['episodes']:,} episodes hit a time limit counted in model time mostly waiting in the "
            f"server's queue ({r['queued']:,.0f} s of {r['spent']:,.0f} s): AgentBench counts that wait too, so these are "
            "losses to the server's load; give the server more parallel slots or send fewer requests at once (--max-in-flight)"
            for r in frame.iter_rows(named=True)]  # fmt: skip


def limit_lines(res: Results) -> list[str]:
    """One line per model on what its request limits paced to (the ``call_limits`` view): requests and tokens per
    minute (configured or reported by the server), and the in-flight cap when it moved (max_in_flight: auto)."""
    lines = []
    waits = _waits(res)
    for r in res.call_limits.sort("model", nulls_last=True).iter_rows(named=True):
        parts = [f"{r['rpm_limit']:,} requests/min" if r["rpm_limit"] else "no requests/min limit known",
                 f"{r['tpm_limit']:,} tokens/min" if r["tpm_limit"] else "no tokens/min limit known"]  # fmt: skip
        if r["in_flight_min"] != r["in_flight_max"]:
            parts.append(f"in flight adapted {r['in_flight_first']} -> {r['in_flight_last']} (between {r['in_flight_min']} "
                         f"and {r['in_flight_max']})")  # fmt: skip
        else:
            parts.append(f"{r['in_flight_last']} in flight")
        lines.append(f"limits: {r['model'] or '?'}: " + ", ".join(parts) + f"; {r['refused_429']:,} of {r['attempts']:,} attempts answered 429"
                     + waits.get(r["model"], ""))
    return lines


def _waits(res: Results) -> dict[str | None, str]:
    """model -> ``; calls answered in 907 s (summed latency of every call) within 75 min of wall time from its first call
    to its last, 248 s of it in the server's queue; 12 s waiting in the engine's limiter before sending`` (the parts known:
    the server's queue only where it says so). Calls overlap: the summed latency can exceed the wall time many times."""
    frame = res.call_usage.group_by("model").agg(pl.col("answer_s").sum(), pl.col("server_queue_s").sum(),  # a model's calls in all
                                                 pl.col("limiter_wait_s").sum(), pl.col("server_queue_s").is_not_null().any().alias("said"),
                                                 pl.col("first_call_at").min(), pl.col("last_call_at").max())  # fmt: skip
    out = {}
    for r in frame.iter_rows(named=True):
        if not r["answer_s"]:
            continue
        text = f"; calls answered in {duration(r['answer_s'])} (summed latency of every call)"
        if r["first_call_at"] is not None and r["last_call_at"] is not None:
            text += f" within {duration((r['last_call_at'] - r['first_call_at']).total_seconds())} of wall time from the first call's start to the last's"
        if r["said"]:
            text += f", {duration(r['server_queue_s'])} of it in the server's queue"
        if (r["limiter_wait_s"] or 0) >= 0.5:
            text += f"; {duration(r['limiter_wait_s'])} waiting in the engine's limiter before sending"
        out[r["model"]] = text
    return out
