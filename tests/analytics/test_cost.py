"""Cost you can trust: the cost views (analytics/60_cost.sql) price every call at the prices in the run config,
with cached input, cache writes and the batch discount, and say what the run would have cost without batch mode
and without caching; the report shows the cost table and the cache hit share; old files still report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest
from rich.console import Console

from agentbench_async.analytics import commands, load
from agentbench_async.analytics.operations import cost_table
from agentbench_async.analytics.report import build_report
from agentbench_async.config import build_config
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.scheduler import Evaluation

# Anthropic-style prices (USD per 1M tokens): input, cache read, cache write, output; batches at half price
PRICES = {"price_in": 3.0, "price_cached_in": 0.3, "price_cache_write": 3.75, "price_out": 15.0, "batch_discount": 0.5}


async def _run(out: Path, batch: bool) -> None:
    server = MockModelServer(MockOptions(cache_min_tokens=1, batch_delay_s=0.01))
    base_url = await server.start()
    model = {"name": "mock-oracle", "provider": "anthropic", "base_url": base_url, "task_header": True, **PRICES,
             "retry_backoff_s": 0.01, **({"batch": {"size": 4, "wait_s": 0.02, "poll_s": 0.01, "poll_max_s": 0.05}} if batch else {})}
    weak = {"name": "mock-weak", "provider": "openai", "base_url": base_url, "task_header": True}  # no price
    try:
        cfg = build_config({"out": out, "envs": ["echo"], "split": "dev", "history": "full", "models": [model, weak],
                            "env_options": {"echo": {"turns": 5, "tasks": 6}}}, where="test")  # fmt: skip
        await Evaluation(cfg, progress=False).run()
    finally:
        await server.stop()


def _expected(out: Path) -> dict[str, float]:
    """The bill recomputed from the stored calls with the formula the README gives."""
    con = duckdb.connect(str(out), read_only=True)
    rows = con.execute("SELECT input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, batch_id IS NOT NULL "
                       "FROM model_calls WHERE model = 'mock-oracle'").fetchall()  # fmt: skip
    con.close()
    total = {"cost": 0.0, "no_batch": 0.0, "no_cache": 0.0, "list": 0.0}
    for tin, read, write, tout, batched in rows:
        read, write = read or 0, write or 0
        full = ((tin - read - write) * 3.0 + read * 0.3 + write * 3.75 + tout * 15.0) / 1e6
        listed = (tin * 3.0 + tout * 15.0) / 1e6
        factor = 0.5 if batched else 1.0
        total["cost"] += full * factor
        total["no_batch"] += full
        total["no_cache"] += listed * factor
        total["list"] += listed
    return total


@pytest.mark.parametrize("batch", [False, True])
async def test_cost_per_model_and_env_with_caching_and_batch_discount(tmp_path, batch):
    out = tmp_path / "cost.duckdb"
    await _run(out, batch)
    expected = _expected(out)
    with load(out) as res:
        cost = cost_table(res)
        report = build_report(res)
        episodes = res.episode_costs
    assert cost["model"].to_list() == ["mock-oracle"], "a model without a price has no cost row"
    row = cost.row(0, named=True)
    assert row["episodes"] == 6 and row["successful_episodes"] == 6
    assert row["cost_usd"] == pytest.approx(expected["cost"])
    assert row["cost_no_batch_usd"] == pytest.approx(expected["no_batch"])
    assert row["cost_no_cache_usd"] == pytest.approx(expected["no_cache"])
    assert row["cost_list_usd"] == pytest.approx(expected["list"])
    assert row["cost_usd"] < row["cost_no_cache_usd"], "reading the cache costs less than sending the prefix again"
    if batch:
        assert row["batched_share"] == 1.0 and row["cost_no_batch_usd"] == pytest.approx(2 * row["cost_usd"])
    else:
        assert row["batched_share"] == 0.0 and row["cost_no_batch_usd"] == pytest.approx(row["cost_usd"])
    assert row["cost_per_episode_usd"] == pytest.approx(row["cost_usd"] / 6)
    assert row["cost_per_success_usd"] == pytest.approx(row["cost_usd"] / 6)
    assert 0 < row["cache_hit_share"] < 1 and row["saved_share"] == pytest.approx(1 - row["cost_usd"] / row["cost_list_usd"])
    oracle = episodes.filter(episodes["model"] == "mock-oracle")
    assert oracle["cost_usd"].sum() == pytest.approx(expected["cost"]) and oracle["calls"].min() == 5
    usage = {r["model"]: r for r in report.usage.iter_rows(named=True)}
    assert usage["mock-oracle"]["cost_usd"] == pytest.approx(expected["cost"])
    assert usage["mock-oracle"]["cache_hit_share"] > 0 and usage["mock-weak"]["cost_usd"] is None


async def test_report_shows_the_cost_table_and_json(tmp_path):
    out = tmp_path / "cost.duckdb"
    await _run(out, batch=True)
    buffer = io.StringIO()
    commands.report([out], html=tmp_path / "r.html", json_out=False, console=Console(file=buffer, width=250))
    text = buffer.getvalue()
    assert "Cost per model × environment" in text and "without batch" in text and "cache hit %" in text
    assert "Cost per model × environment (USD)" in (tmp_path / "r.html").read_text()
    buffer = io.StringIO()
    commands.report([out], html=None, json_out=True, console=Console(file=buffer, width=250))
    data = json.loads(buffer.getvalue())
    assert [r["model"] for r in data["operations"]["cost"]] == ["mock-oracle"]


def test_old_files_report_cost_at_list_price(known_run: Path):
    """A file written before the cache and batch columns existed: every call at price_in/price_out."""
    with load(known_run) as res:
        cost = list(cost_table(res).iter_rows(named=True))
        raw = res.sql("SELECT sum(input_tokens)::DOUBLE AS i, sum(output_tokens)::DOUBLE AS o FROM calls WHERE call_model = 'alpha'").row(0, named=True)
    assert {(r["model"], r["env"]) for r in cost} == {("alpha", "os"), ("alpha", "kg")}
    total = sum(r["cost_usd"] for r in cost)
    assert total == pytest.approx((raw["i"] * 2.0 + raw["o"] * 8.0) / 1e6)
    assert all(r["cost_usd"] == r["cost_list_usd"] == r["cost_no_batch_usd"] and r["cache_hit_share"] == 0 for r in cost)


def test_report_price_flag_prices_a_model_the_run_gave_no_price(known_run: Path):
    """``report --price MODEL=IN,OUT`` (the README promised prices passed to report; there was no such option): beta ran
    without prices, so its cost was 'no price'; given on the command line it is its tokens at those prices."""
    import subprocess
    import sys

    def usage(*flags: str) -> dict[str, object]:
        proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(known_run), "--json", *flags],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return next(r for r in json.loads(proc.stdout)["operations"]["usage"] if r["model"] == "beta")

    assert usage()["cost_usd"] is None
    priced = usage("--price", "beta=1.5,6")
    assert priced["cost_usd"] == pytest.approx((priced["input_tokens"] * 1.5 + priced["output_tokens"] * 6) / 1e6)
    bad = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(known_run), "--price", "beta=1.5"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "--price: expected MODEL=IN,OUT" in bad.stderr and "Traceback" not in bad.stderr
