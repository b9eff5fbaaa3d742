"""The ``agentbench`` command line (the command and option names are a contract)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from rich.markup import escape
from rich.table import Table

from . import __version__, eventloop
from .bounds import ERROR_LINE_CHARS, check_http_url, check_port, excerpt
from .config import RunConfig, build_config, load_config_file
from .errors import AgentBenchError, ConfigError, SpendCapReached
from .output import console
from .redaction import RedactedStream, redact
from .wording import counted

_console = console()  # a terminal's width; else COLUMNS or 200, lines never broken (output.py)
_err = console(RedactedStream(lambda: sys.stderr))  # what a run prints, without its secrets (redaction.py)


def _count_or_auto(text: str) -> int | str:
    """A flag's value: a number, or ``auto`` (left to the engine)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None


def _turn_caps(env: Any) -> str:
    """``envs``' turn cap: one number, or text mode's / tools mode's where they differ (webshop: ``10 / 20``)."""
    text, tools = env.turn_cap("text"), env.turn_cap("tools")
    return str(text) if not env.supports_tools or text == tools else f"{text} / {tools}"


def _price(text: str) -> tuple[str, tuple[float, float]]:
    """``--price MODEL=IN,OUT``: USD per 1M input and output tokens."""
    model, _, pair = text.rpartition("=")
    parts = pair.split(",")
    try:
        prices = (float(parts[0]), float(parts[1])) if model and len(parts) == 2 else None
    except ValueError:
        prices = None
    if prices is None or min(prices) < 0:
        raise argparse.ArgumentTypeError(f"expected MODEL=IN,OUT (USD per 1M input, output tokens, e.g. gpt-4o=2.5,10), got {text!r}")
    return model, prices


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose mistakes are one line and a hint (its own prints the whole usage first: 30 lines for run)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="agentbench", description="AgentBench as a high-throughput asyncio evaluation engine.")
    p.add_argument("--version", action="version", version=f"agentbench-async {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="evaluate models on environments (re-running resumes)")
    run.add_argument("--config", type=Path, help="YAML run config (flags override its values)")
    run.add_argument("--model", help="model name (the provider's model id unless the config sets 'model')")
    run.add_argument("--provider", choices=["openai", "anthropic", "azure"], help="wire format (default openai: any OpenAI-compatible "
                     "server; azure: Azure OpenAI, the deployment as --model, api-version from $OPENAI_API_VERSION)")
    run.add_argument("--base-url", help="API base URL: an OpenAI-compatible server's root, e.g. http://localhost:8000/v1; "
                     "Anthropic: the host root as its SDK takes it (https://api.anthropic.com) or the same ending in /v1")
    run.add_argument("--api-key-env", help="name of the environment variable holding the API key (default: the provider SDK's, "
                     "OPENAI_API_KEY, ANTHROPIC_API_KEY or AZURE_OPENAI_API_KEY, when set)")
    run.add_argument("--env", help="environments, comma-separated: os,db,kg,card_game,ltp,alfworld,webshop,mind2web or an installed "
                     "plugin's (agentbench envs lists them); all (the default): every built-in one, each without --data-dir where its "
                     "official data is absent (all,NAME adds a plugin)")
    run.add_argument("--split", choices=["dev", "test", "std"], help="task split (test, or std as AgentBench names it; default test)")
    run.add_argument("--task-id", action="append", metavar="ID", help="only this task of each environment that has it "
                     "(repeatable; agentbench envs --tasks ENV lists the ids)")
    run.add_argument("--task-ids", type=Path, metavar="FILE", help="only the tasks whose ids FILE lists, one a line (# comments)")
    run.add_argument("--limit", type=int, help="only the first N tasks of each environment")
    run.add_argument("--repeats", type=int, help="run every task K times (pass@k, pass^k)")
    run.add_argument("--max-concurrency", type=int, help="episodes in flight in total (default 256)")
    run.add_argument("--infra-retries", type=int, help="run an episode that ended env_error/model_error again up to N times "
                     "within the run, the earlier attempts kept (default 2; 0: never)")
    run.add_argument("--rpm", type=int, help="requests per minute for the model")
    run.add_argument("--tpm", type=int, help="tokens per minute for the model")
    run.add_argument("--max-retries", type=int, help="retries per model call (default 5)")
    run.add_argument("--max-in-flight", type=_count_or_auto, help="HTTP requests in flight for the model (default 64; auto: adapted "
                     "to the server's latency and refusals)")
    run.add_argument("--max-connections", type=int, metavar="N", help="connections to the model's server at once (default 1000, "
                     "the SDKs' pool): requests beyond wait for one; fewer while the server refuses connections")
    run.add_argument("--timeout", type=float, help="seconds per HTTP attempt (default 600, as the SDKs; connecting at most 5 s)")
    run.add_argument("--max-response-bytes", type=int, metavar="N", help="the largest model response body read "
                     "(default 67108864 = 64 MiB); a larger one is that call's model_error")
    run.add_argument("--temperature", type=float, help="sampling temperature (default 0; Anthropic: none sent unless given, as its SDK)")
    run.add_argument("--max-tokens", type=int, help="max tokens per reply (default 512)")
    run.add_argument("--context-window", type=int, help="the model's context window in tokens (pre-check)")
    run.add_argument("--batch", nargs="?", type=int, const=True, metavar="SIZE",
                     help="send the model's requests through its provider's batch API (OpenAI Batch API, Anthropic Message "
                     "Batches: about half the price, results within 24 h), SIZE requests per batch (default 100)")
    run.add_argument("--no-prompt-caching", action="store_true",
                     help="Anthropic: no cache_control breakpoints on the stable prefix (prompt caching is on by default)")
    run.add_argument("--task-header", action="store_true",
                     help="send the X-AgentBench-Task header with each request (for the built-in mock: serve-mock then plays "
                     "the policy of the model name, mock-oracle or mock-weak, on each task)")
    run.add_argument("--data-dir", type=Path, help="AgentBench's data/ folder: run the official tasks (with --env all, of the "
                     "environments that find what they need there)")
    run.add_argument("--action-mode", choices=["text", "tools"], help="text protocol (default) or native tool calling")
    run.add_argument("--history", choices=["full", "agentbench"],
                     help="history sent each turn (default agentbench: AgentBench's 3,500-segment truncation; full is an opt-in)")
    run.add_argument("--judge-model", help="judge model for ltp (same provider options as --model unless --judge-* given)")
    run.add_argument("--judge-provider", choices=["openai", "anthropic", "azure"], help="the judge's wire format (default: --provider)")
    run.add_argument("--judge-base-url", help="the judge's API base URL (default: --base-url)")
    run.add_argument("--judge-api-key-env", help="the variable holding the judge's API key (default: --api-key-env)")
    # the run's limit flags (--rpm, --tpm, --max-retries, --max-in-flight, --timeout, --max-connections) apply to the judge too;
    # these override them for the judge alone
    run.add_argument("--judge-rpm", type=int, help="requests per minute for the judge (default: --rpm)")
    run.add_argument("--judge-tpm", type=int, help="tokens per minute for the judge (default: --tpm)")
    run.add_argument("--judge-max-retries", type=int, help="retries per judge call (default: --max-retries)")
    run.add_argument("--judge-max-in-flight", type=_count_or_auto, help="judge HTTP requests in flight (default: --max-in-flight)")
    run.add_argument("--judge-timeout", type=float, help="seconds per judge HTTP attempt (default: --timeout)")
    run.add_argument("--judge-max-connections", type=int, metavar="N", help="connections to the judge's server (default: --max-connections)")
    run.add_argument("--db-url", help="db: use this MySQL/MariaDB server (mysql://user:pass@host:port/) instead of a private one")
    run.add_argument("--kg-endpoint", help="kg: SPARQL 1.1 endpoint URL (e.g. a Virtuoso with Freebase)")
    _add_data_flags(run)
    run.add_argument("--new-run", action="store_true", help="add a run with a different config to an existing --out file")
    _add_spend_flags(run)
    run.add_argument("--no-progress", action="store_true", help="no live display (nor progress lines)")
    run.add_argument("--progress-every", type=float, metavar="SECONDS", help="output that is not a terminal (a log file, CI): a "
                     "progress line this often (default 30): done/total, calls/s, retries, 429s, ETA")
    run.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                     help="play the episodes on a Ray cluster: auto, HOST:PORT or ray://HOST:PORT (no ADDRESS: a Ray instance on "
                     "this machine); needs pip install 'agentbench-async[ray]'")
    run.add_argument("--workers", type=int, help="worker processes (default with --ray: one per CPU); alone: that many on this machine")
    run.add_argument("--out", type=Path, help="the DuckDB file to write (required here or in the config)")

    plan = sub.add_parser("plan", parents=[run], add_help=False, help="what a run will cost and take, before it runs: episodes, "
                          "first requests, tokens, USD and time per model x environment (the same flags as run; no model call)")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON instead of a table")
    plan.add_argument("--demo", action="store_true", help="plan agentbench demo's run (its mock models; --env, --split, --limit "
                      "and --out as demo takes them)")
    plan.add_argument("--from", dest="calibrate_from", type=Path, nargs="+", metavar="FILE", help="earlier result files: the "
                      "tokens a character and the calls, growth and output of an episode of the same model and environment")
    plan.add_argument("--chars-per-token", type=float, metavar="N", help="without a tokenizer or --from: characters a token "
                      "(default 4)")

    demo = sub.add_parser("demo", help="evaluate the built-in mock model (oracle and weak) on every environment")
    demo.add_argument("--out", type=Path, default=Path("runs/demo.duckdb"), help="the DuckDB file to write (running again resumes)")
    demo.add_argument("--split", choices=["dev", "test", "std"], default="dev", help="task split (default dev; std: test)")
    demo.add_argument("--env", help="only these environments (default: all that are available)")
    demo.add_argument("--limit", type=int, help="only the first N tasks of each environment")
    demo.add_argument("--no-progress", action="store_true", help="no live display")

    rep = sub.add_parser("report", help="score and failure tables of one or more run files")
    rep.add_argument("paths", type=Path, nargs="+", metavar="PATH.duckdb", help="result files, reported together")
    rep.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.add_argument("--pool", action="store_true", help="merge the configurations of a model x environment into one row "
                     "(by default each deciding configuration, e.g. --history full vs agentbench, has its own row)")
    rep.add_argument("--price", type=_price, action="append", metavar="MODEL=IN,OUT",
                     help="USD per 1M input and output tokens for MODEL's cost (repeatable; overrides price_in/price_out "
                     "stored with its runs), e.g. --price gpt-4o=2.5,10")
    rep.add_argument("--denominator", choices=("paper", "outcomes"), default="paper",
                     help="paper (default): every episode counts, an env_error/model_error/cancelled one as a failure, as the "
                     "paper counts every sample; outcomes: only the model's own outcomes (infrastructure failures left out)")

    sql = sub.add_parser("sql", help="run SQL against a run file (read-only)")
    sql.add_argument("path", type=Path, metavar="PATH.duckdb", help="the result file (opened read-only)")
    sql.add_argument("query", help="one SQL statement over its tables and views")
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table", help="how to print the rows (default table)")

    show = sub.add_parser("show", help="one episode's transcript with its events")
    show.add_argument("path", type=Path, metavar="PATH.duckdb", help="the result file")
    show.add_argument("episode_id", help="the episode, as <model>/<env>/<split>/<task_id>/<repeat> (report, view and sql show them)")

    cmp_ = sub.add_parser("compare", help="compare two runs (or two models) episode by episode")
    cmp_.add_argument("a", type=Path, metavar="A.duckdb", help="side A's result file")
    cmp_.add_argument("b", type=Path, metavar="B.duckdb", nargs="?", help="side B's result file (default: A's, two models of one file)")
    cmp_.add_argument("--model-a", help="A's model when its file has several")
    cmp_.add_argument("--model-b", help="B's model when its file has several")
    cmp_.add_argument("--allow-different-settings", action="store_true",
                      help="pair runs even when their result-deciding settings (history, data, split, judge, ...) differ")
    cmp_.add_argument("--config-a", help="A's configuration when its model has several in the file (its label as the report "
                      "prints it, e.g. 'history: full', or the start of its config id)")
    cmp_.add_argument("--config-b", help="B's configuration (as --config-a)")

    view = sub.add_parser("view", help="browse result files in a local web app (scores, failures, transcripts, live, compare, SQL)")
    view.add_argument("paths", type=Path, nargs="+", metavar="PATH.duckdb", help="result files, finished or being written")
    view.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback; anything else shows "
                      "the results to your network)")
    view.add_argument("--port", type=int, default=8760, help="port (default 8760; 0 picks a free one)")
    view.add_argument("--pool", action="store_true", help="merge the configurations of a model x environment into one row")
    view.add_argument("--csv-max-rows", type=int, default=1_000_000, metavar="N", help="the SQL page's CSV download stops after "
                      "N rows (default 1000000)")
    view.add_argument("--csv-max-mib", type=int, default=64, metavar="M", help="... and before M MiB (default 64)")
    view.add_argument("--export", type=Path, metavar="DIR", help="write a static site into DIR (new or empty) instead of serving: "
                      "overview, failure matrix, episode lists and every transcript; opens from file:// or any static host")

    envs = sub.add_parser("envs", help="environments, splits, task counts, what each needs installed")
    envs.add_argument("--tasks", metavar="ENV", help="list ENV's task ids instead, one a line (for --task-id/--task-ids of run)")
    envs.add_argument("--split", choices=["dev", "test", "std"], default="test", help="with --tasks: the split (default test)")
    envs.add_argument("--data-dir", type=Path, help="with --tasks: AgentBench's data/ folder (the official tasks' ids)")

    new_env = sub.add_parser("new-env", help="write an installable environment package to start your own from (runs at once)")
    new_env.add_argument("name", metavar="NAME", help="the environment's name (lowercase letters, digits, _)")
    new_env.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write the package (new or empty)")

    mock = sub.add_parser("serve-mock", help="serve the built-in mock model (OpenAI-compatible) on loopback")
    mock.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    mock.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    mock.add_argument("--policy", default="oracle", help="default policy (a request's model name mock-<policy> overrides)")
    mock.add_argument("--latency-ms", type=float, default=0.0, help="milliseconds before each answer")
    mock.add_argument("--latency-jitter-ms", type=float, default=0.0, help="plus a uniform random extra in [0, this] milliseconds")
    mock.add_argument("--fault-rate", type=float, default=0.0, help="share of requests answered with an injected fault")
    mock.add_argument("--faults", default="429,500,503,timeout,reset,malformed", help="fault kinds to draw from")
    mock.add_argument("--rpm-limit", type=int, help="enforce this many requests per minute (429 beyond)")
    mock.add_argument("--rate-headers", choices=("openai", "anthropic", "none"),
                      help="enforce --rpm-limit as a token bucket and report it in this provider's rate-limit headers (none: hidden)")
    mock.add_argument("--capacity", type=int, help="serve this many requests at once, queue more (latency climbs); as vLLM/TGI")
    mock.add_argument("--queue-limit", type=int, default=0, help="with --capacity: requests that may wait; 429 beyond")
    mock.add_argument("--data-dir", type=Path, help="AgentBench data/ folder, to play official tasks")
    mock.add_argument("--env", action="append", default=[], metavar="FILE.py", help="also play the mock players of the environment "
                      "in this Python file (as run --env FILE.py; repeatable)")
    _add_data_flags(mock)
    mock.add_argument("--preload", metavar="SPLIT", help="load this split of every environment before serving (official tasks where "
                      "the data flags give them, else built-in), so the first requests of a run do not wait while task sets load")
    mock.add_argument("--seed", type=int, default=0, help="seed of the injected faults' and the latency jitter's random draws")
    mock.add_argument("--overflow-shape", default="", help="answer context overflows like this server: "
                      "openai, llama-cpp-python, vllm-legacy, vllm, sglang, tgi, llama.cpp, openrouter, anthropic (default: the endpoint's own)")
    mock.add_argument("--reasoning", help="act as a reasoning model: openai (parameter rules, reasoning tokens), reasoning_content, "
                      "reasoning, think (<think> in content) or anthropic (thinking blocks with signatures)")
    mock.add_argument("--reasoning-tokens", type=int, default=64, help="thinking tokens per reply (a smaller output limit is used up thinking)")
    mock.add_argument("--batch-delay", type=float, default=0.05, help="seconds before a submitted batch is processed (batch APIs)")

    data = sub.add_parser("data", help="official AgentBench data")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")
    pull = data_sub.add_parser("pull", help="download the official data files (pinned commit, sha256-checked)")
    pull.add_argument("--dest", type=Path, default=Path("data/agentbench"), help="folder to download into (becomes --data-dir)")
    pull.add_argument("--base-url", help="mirror serving <commit>/<path> (default: GitHub raw files)")
    pull.add_argument("--ca-bundle", type=Path, help="PEM file of extra CA certificates (e.g. a company proxy's); "
                      "HTTP(S)_PROXY, NO_PROXY and SSL_CERT_FILE are honoured")
    return p


# -- run ---------------------------------------------------------------------------------------
def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = load_config_file(args.config) if args.config else {}
    for flag, key in (("env", "envs"), ("split", "split"), ("limit", "limit"), ("repeats", "repeats"),
                      ("max_concurrency", "max_concurrency"), ("data_dir", "data_dir"), ("action_mode", "action_mode"),
                      ("history", "history"), ("out", "out"), ("infra_retries", "infra_retries")):  # fmt: skip
        value = getattr(args, flag)
        if value is not None:
            raw[key] = value
    model_flags = {
        "provider": args.provider, "base_url": args.base_url, "api_key_env": args.api_key_env, "rpm": args.rpm,
        "tpm": args.tpm, "max_retries": args.max_retries, "max_in_flight": args.max_in_flight, "timeout": args.timeout, "max_response_bytes": args.max_response_bytes,
        "max_connections": args.max_connections,
        "temperature": args.temperature, "max_tokens": args.max_tokens, "context_window": args.context_window,
        "batch": args.batch, "prompt_caching": False if args.no_prompt_caching else None,
        "task_header": True if args.task_header else None,
    }  # fmt: skip
    model_flags = {k: v for k, v in model_flags.items() if v is not None}
    if args.model:
        raw["models"] = [{"name": args.model, **model_flags}]
    elif model_flags:
        if not raw.get("models"):
            raise ConfigError("model options were given without --model (or a 'models:' list in the config)")
        raw["models"] = [{**(m if isinstance(m, dict) else {"name": m}), **model_flags} for m in raw["models"]]
    # the run's limit flags hold for the judge too, unless a --judge-* flag says otherwise
    judge_limits = {key: value for key in ("rpm", "tpm", "max_retries", "max_in_flight", "timeout", "max_connections")
                    if (value := getattr(args, f"judge_{key}") if getattr(args, f"judge_{key}") is not None else model_flags.get(key))
                    is not None}  # fmt: skip
    if args.judge_model:
        # the judge speaks to the same server as the evaluated model unless --judge-* says otherwise
        judge = {"name": args.judge_model}
        for src, dst in (("judge_provider", "provider"), ("judge_base_url", "base_url"), ("judge_api_key_env", "api_key_env"),
                         ("task_header", "task_header")):
            value = getattr(args, src) or model_flags.get(dst)
            if value:
                judge[dst] = value
        raw["judge"] = {**judge, **judge_limits}
    elif raw.get("judge") and judge_limits:
        judge_raw = raw["judge"]
        raw["judge"] = {**(judge_raw if isinstance(judge_raw, dict) else {"name": judge_raw}), **judge_limits}
    options: dict[str, dict[str, Any]] = raw.setdefault("env_options", {}) or {}
    raw["env_options"] = options
    if args.db_url:
        options.setdefault("db", {})["db_url"] = args.db_url
    if args.kg_endpoint:
        options.setdefault("kg", {})["kg_endpoint"] = args.kg_endpoint
    _add_env_options(args, options)
    if args.ray is not None or args.workers is not None:
        given = raw.get("ray")
        ray_raw = dict(given) if isinstance(given, dict) else {"address": given} if isinstance(given, str) else {}
        if args.ray is not None:
            ray_raw["address"] = args.ray
        if args.workers is not None:
            ray_raw["workers"] = args.workers
        raw["ray"] = ray_raw
    if args.new_run:
        raw["new_run"] = True
    _spend_settings(args, raw)
    ids = list(args.task_id or [])
    if args.task_ids is not None:
        ids += _task_ids_file(args.task_ids)
    if ids:
        raw["task_ids"] = ids
    return raw


def _task_ids_file(path: Path) -> list[str]:
    """The task ids a ``--task-ids`` file lists: one a line, blank lines and ``#`` comments skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--task-ids {path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    if not any(ids):
        raise ConfigError(f"--task-ids {path}: lists no task id (one a line; agentbench envs --tasks ENV > {path} writes them)")
    return [i for i in ids if i]


def _flagged_env_options(args: argparse.Namespace) -> dict[str, str]:
    """The environments the run's option flags name -> the flag that named it first (--env-option, --db-url, ...)."""
    named: dict[str, str] = {}
    for item in args.env_option:
        named.setdefault(item.partition("=")[0].partition(".")[0].strip().lower(), f"--env-option {item}")
    for flag, env in (("db_url", "db"), ("kg_endpoint", "kg"), ("alfworld_data", "alfworld"), ("webshop_data", "webshop"),
                      ("mind2web_data", "mind2web")):  # fmt: skip
        if getattr(args, flag) is not None:
            named.setdefault(env, "--" + flag.replace("_", "-"))
    return named


def _add_spend_flags(run: argparse.ArgumentParser) -> None:
    """run's (and plan's) prices, spend caps and per-episode limits (spend.py)."""
    run.add_argument("--price", type=_price, action="append", metavar="MODEL=IN,OUT", help="USD per 1M input and output tokens of "
                     "MODEL (repeatable; sets its price_in, price_out), e.g. --price gpt-4o=2.5,10")
    run.add_argument("--max-cost", type=float, metavar="USD", help="stop the run once its calls have cost this much at the models' "
                     "prices (earlier invocations of the run included): no new call, the episodes in flight end cancelled and a "
                     "resume with a higher cap plays them")
    run.add_argument("--max-total-tokens", type=int, metavar="N", help="the same, counted in input + output tokens (--max-tokens "
                     "is the limit of one reply)")
    run.add_argument("--episode-max-tokens", type=int, metavar="N", help="end an episode before its next call once the model's "
                     "calls used N tokens: status episode_limit_exceeded (a deviation from AgentBench, which has turn caps only)")
    run.add_argument("--episode-max-cost", type=float, metavar="USD", help="the same, in USD at the model's prices")
    run.add_argument("--episode-max-seconds", type=float, metavar="S", help="end an episode still running S seconds after it began")


def _spend_settings(args: argparse.Namespace, raw: dict[str, Any]) -> None:
    """The spend flags into the merged settings (flags over the config file's values)."""
    for flag in ("max_cost", "max_total_tokens"):
        if getattr(args, flag) is not None:
            raw[flag] = getattr(args, flag)
    limits = {key: getattr(args, f"episode_max_{key}") for key in ("tokens", "cost", "seconds")}
    if any(v is not None for v in limits.values()):
        given = raw.get("episode_limits")
        raw["episode_limits"] = {**(given if isinstance(given, dict) else {}), **{k: v for k, v in limits.items() if v is not None}}
    prices = dict(args.price or [])
    models = [m if isinstance(m, dict) else {"name": m} for m in raw.get("models") or []]
    judge = raw.get("judge")
    judge = {"name": judge} if isinstance(judge, str) else judge if isinstance(judge, dict) else None
    names = [m.get("name") for m in models] + ([judge.get("name")] if judge else [])
    for model in prices:
        if model not in names:
            raise ConfigError(f"--price {model}=...: {model} is not a model of this run ({', '.join(map(str, names)) or 'none'})")
    if prices:
        priced = lambda m: {**m, **dict(zip(("price_in", "price_out"), prices[m["name"]]))} if m.get("name") in prices else m  # noqa: E731
        raw["models"] = [priced(m) for m in models]
        if judge:
            raw["judge"] = priced(judge)


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    """The environments' own data downloads and --env-option (run and serve-mock)."""
    parser.add_argument("--alfworld-data", type=Path, help="alfworld: ALFWorld's data folder ($ALFWORLD_DATA, with json_2.1.1/) for the official games")
    parser.add_argument("--webshop-data", type=Path, help="webshop: WebShop's data folder (items_shuffle.json, items_ins_v2.json, items_human_ins.json)")
    parser.add_argument("--mind2web-data", type=Path, help="mind2web: Mind2Web's data folder (data_dev/, data_std/, scores_all_data.pkl)")
    parser.add_argument("--env-option", action="append", default=[], metavar="ENV.KEY=VALUE", help="an environment option, e.g. os.rootfs=/srv/ubuntu")
    parser.add_argument("--tasks", action="append", default=[], metavar="ENV=PATH", help="play your own task file, in AgentBench's "
                        "format for that environment (os, db, kg, ltp), instead of its built-in or official tasks (repeatable)")


def _add_env_options(args: argparse.Namespace, options: dict[str, dict[str, Any]]) -> None:
    from .envs.own_tasks import TASKS_FILE, parse_tasks_flags

    for env, path in parse_tasks_flags(args.tasks).items():
        options.setdefault(env, {})[TASKS_FILE] = path
    for flag in ("alfworld_data", "webshop_data", "mind2web_data"):
        value = getattr(args, flag)
        if value is not None:
            options.setdefault(flag.removesuffix("_data"), {})[flag] = str(value)
    for item in args.env_option:
        key, sep, value = item.partition("=")
        env, dot, name = key.partition(".")
        if not sep or not dot or not env or not name:
            raise ConfigError(f"--env-option {item!r}: expected ENV.KEY=VALUE, e.g. os.rootfs=/srv/ubuntu")
        options.setdefault(env, {})[name] = value


def _cmd_run(args: argparse.Namespace) -> int:
    cfg = build_config(_run_settings(args), where=str(args.config) if args.config else "flags")
    for env, flag in _flagged_env_options(args).items():  # an option for an environment the run does not play: a mistake
        if env not in cfg.envs:
            raise ConfigError(f"{flag}: {env} is not one of this run's environments ({', '.join(cfg.envs)}); add it to --env or "
                              "drop the option")  # fmt: skip
    if args.progress_every is not None and args.progress_every <= 0:
        raise ConfigError(f"--progress-every: expected seconds > 0, got {args.progress_every:g} (--no-progress: no lines)")
    return _execute(cfg, progress=False if args.no_progress else None, command="run", progress_every=args.progress_every)


def _execute(cfg: RunConfig, *, progress: bool | None, command: str, skip_unavailable: bool = False,
             progress_every: float | None = None) -> int:
    from .scheduler import Evaluation

    if cfg.ray is not None:  # Ray is imported only here, for a run that asks for it
        from .distributed import require_ray

        require_ray()
        from .distributed.evaluation import RayEvaluation as Evaluation  # type: ignore[assignment]

    every = {} if progress_every is None else {"progress_every": progress_every}
    evaluation = Evaluation(cfg, console=_err, progress=progress, command=command, skip_unavailable_envs=skip_unavailable, **every)
    try:
        summary = eventloop.run(evaluation.run())
    except SpendCapReached as exc:  # a resume with the cap it stopped at: nothing run
        _err.print(f"stopped: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 3
    cancelled = summary.statuses.get("cancelled", 0)  # never "finished": a resume plays them
    statuses = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.statuses.items()) if k != "cancelled") or "nothing to do"
    stopped = f"; {counted(cancelled, 'episode')} cancelled (a resume plays them)" if cancelled else ""
    _err.print(
        f"run {summary.run_id}: {counted(summary.episodes - cancelled, 'episode')} finished ({statuses}){stopped}; "
        f"{summary.skipped:,} already done; "
        f"{counted(summary.calls, 'model call')}, {counted(summary.retries, 'retry', 'retries')}, {summary.seconds:.1f} s -> {summary.out}",
        markup=False, highlight=False,
    )
    pace = summary.pace.lines(cfg.models, cfg.judge, cfg.max_concurrency)
    for line in [*summary.model_error_lines(), *summary.retry_lines(), *summary.retry_after_lines(), *summary.adaptation_lines(), *pace]:
        _err.print(line, markup=False, highlight=False, soft_wrap=True)  # one line each, for grep
    if cfg.action_mode == "tools" and summary.episodes:
        from .analytics.commands import tool_hints

        for line in tool_hints(Path(summary.out)):
            _err.print(line, markup=False, highlight=False, soft_wrap=True)  # one line, for grep
    if summary.cap_reached:  # stopped at the run's spend cap: one line, and its own exit code
        _err.print(f"stopped: {summary.cap_reached}; {counted(summary.statuses.get('cancelled', 0), 'episode')} cancelled: run the "
                   "same command with a higher cap to resume", markup=False, highlight=False, soft_wrap=True)
        return 3
    if summary.interrupted:
        cancelled = summary.statuses.get("cancelled", 0)
        _err.print(f"interrupted ({counted(cancelled, 'episode')} cancelled): run the same command again to resume; it re-runs the "
                   "cancelled episodes and the tasks not started yet", markup=False, highlight=False)
        return 130
    failed = summary.infra_failed_models()
    if failed:
        _err.print(f"every episode of {', '.join(failed)} failed for infrastructure reasons (model_error/env_error)", markup=False)
    if summary.fatal_errors or failed:
        return 1
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from .analytics.plan_compare import save_plan
    from .planning import make_plan, print_plan

    if args.demo:  # agentbench demo's run (its mock models, the dev split unless --split), as demo would play it
        from .envs import available_envs

        envs = [e.strip() for e in args.env.split(",")] if args.env else available_envs()
        raw = _demo_settings(args.out or Path("runs/demo.duckdb"), args.split or "dev", envs, args.limit, "http://127.0.0.1:8765/v1")
        cfg = build_config(raw, where="demo")
    else:
        cfg = build_config(_run_settings(args), where=str(args.config) if args.config else "flags")
    plan = eventloop.run(make_plan(cfg, calibrate_from=args.calibrate_from or [], chars_per_token=args.chars_per_token))
    saved = save_plan(plan.as_dict(), cfg.out)  # beside the run's file: report puts it beside what the run used
    if args.json:
        print(json.dumps(plan.as_dict(), indent=1))
    else:
        print_plan(plan, _console)
        _err.print(saved, markup=False, highlight=False, soft_wrap=True)
    return 0


# -- demo --------------------------------------------------------------------------------------
def _cmd_demo(args: argparse.Namespace) -> int:
    from .envs import available_envs

    envs = [e.strip() for e in args.env.split(",")] if args.env else available_envs()
    return eventloop.run(_demo(args.out, args.split, envs, args.limit, progress=False if args.no_progress else None))


def _demo_settings(out: Path, split: str, envs: list[str], limit: int | None, base_url: str) -> dict[str, Any]:
    """The demo's run: the mock model's oracle and weak policies (and its judge) served at ``base_url``."""
    return {
        "out": out, "split": split, "envs": envs, "limit": limit, "max_concurrency": 64,
        "models": [
            {"name": "mock-oracle", "base_url": base_url, "task_header": True},
            {"name": "mock-weak", "base_url": base_url, "task_header": True},
        ],
        "judge": {"name": "mock-judge", "base_url": base_url, "task_header": True},
    }  # fmt: skip


async def _demo(out: Path, split: str, envs: list[str], limit: int | None, *, progress: bool | None) -> int:
    from .mock.server import MockModelServer, MockOptions
    from .scheduler import Evaluation

    server = MockModelServer(MockOptions(policy="oracle", latency_ms=5, latency_jitter_ms=20))
    base_url = await server.start()
    try:
        cfg = build_config(_demo_settings(out, split, envs, limit, base_url), where="demo")
        changed = _demo_changes(out, cfg)
        if changed:  # an edited environment (its code), say: played again, not resumed into the earlier results
            _err.print(f"demo: {'; '.join(changed)}: playing again (the earlier results stay in {out} as another "
                       "configuration)", markup=False, highlight=False, soft_wrap=True)  # fmt: skip
            cfg.new_run = True
        for line in _missing_players(cfg.envs):  # the mock answers without a player: say so before it plays
            _err.print(line, markup=False, highlight=False, soft_wrap=True)
        evaluation = Evaluation(cfg, console=_err, progress=progress, command="demo", skip_unavailable_envs=True)
        summary = await evaluation.run()
    finally:
        await server.stop()
    _err.print(f"demo: {counted(summary.episodes, 'episode')} finished, {summary.skipped:,} already done -> {out}", markup=False,
               highlight=False)
    from .analytics import commands

    commands.summary(out, console=_console)  # the short summary and the commands that show more
    if summary.interrupted:
        return 130
    failed = summary.infra_failed_models()
    if failed:  # an environment's bug in every episode (env_error) is no demo that worked
        _err.print(f"demo: every episode of {', '.join(failed)} failed for infrastructure reasons (env_error/model_error); "
                   f"agentbench report {out} names the errors", markup=False, highlight=False, soft_wrap=True)  # fmt: skip
        return 1
    return 0


def _missing_players(envs: list[str]) -> list[str]:
    """One line per environment whose mock players the demo lacks (``oracle``, ``weak``): its episodes get the mock's
    "no policy" reply, which fails them; where to define them."""
    from .envs import env_class

    lines = []
    for env in envs:
        try:
            have = env_class(env).policies()
        except Exception:  # noqa: BLE001 - an environment that cannot say: its run says why
            continue
        missing = [name for name in ("oracle", "weak") if name not in have]
        if missing:
            lines.append(f"demo: {env} has no mock player {' or '.join(missing)}: those episodes get a reply that fails them; define "
                         f"{', '.join(f'{m}(task, messages)' for m in missing)} in its file, or Environment.policies() "
                         "(docs/writing-an-environment.md)")  # fmt: skip
    return lines


def _demo_changes(out: Path, cfg: RunConfig) -> list[str]:
    """What differs between the demo's latest run in ``out`` and this one (``code: X in the file, Y now``), when none of
    the file's runs has this one's fingerprint; empty otherwise (a new file, a resume)."""
    if not out.is_file():
        return []
    import duckdb

    from .differences import config_changes

    try:
        with duckdb.connect(str(out), read_only=True) as con:
            rows = con.execute("SELECT fingerprint, config FROM runs ORDER BY created_at DESC").fetchall()
    except duckdb.Error:
        return []  # not readable here: the run's own checks say why
    if not rows or any(fingerprint == cfg.fingerprint() for fingerprint, _ in rows):
        return []
    return config_changes(json.loads(rows[0][1]), cfg.public_dict())


# -- read-side commands ------------------------------------------------------------------------
def _print_result(rows: list[tuple[Any, ...]], columns: list[str], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([dict(zip(columns, r)) for r in rows], default=str))
    elif fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")  # \n, not csv's \r\n: the output goes to tail, cut, read
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        table = Table()
        for c in columns:
            table.add_column(c)
        for r in rows:
            table.add_row(*("" if v is None else str(v) for v in r))
        from .analytics.terminal import print_table

        print_table(_console, table, keys=1)  # nothing cut on a narrow terminal: compact, or split repeating column 1


_READING = ("SELECT", "EXPLAIN", "PRAGMA", "CALL")  # the statements `sql` runs: they read (SHOW, DESCRIBE, FROM x: SELECT)


def _check_read_only(query: str) -> None:
    """``agentbench sql`` reads: a statement that would write (DELETE, CREATE, COPY, ATTACH, SET, ...) is one line saying so
    (DuckDB would answer with a binder error, or change only the reader's own in-memory views)."""
    import duckdb

    try:
        kinds = [statement.type.name for statement in duckdb.extract_statements(query)]
    except duckdb.Error:
        return  # a syntax error: the query's own run says where
    writing = [kind for kind in kinds if kind not in _READING]
    if writing:
        raise ConfigError(f"sql is read-only: a {writing[0]} statement changes data; give a SELECT (SHOW TABLES lists what "
                          "there is to read)")  # fmt: skip


def _cmd_sql(args: argparse.Namespace) -> int:
    from .analytics.loading import load

    _check_read_only(args.query)
    with load(args.path) as res:  # read-only; a file a run is writing is read from its live snapshot
        frame = res.sql(args.query)
    if frame.width:
        _print_result(frame.rows(), frame.columns, args.format)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .analytics import commands

    return commands.report(args.paths, html=args.html, json_out=args.json, console=_console, pool=args.pool,
                           denominator=args.denominator, prices=dict(args.price or []))


def _cmd_show(args: argparse.Namespace) -> int:
    from .analytics import commands

    return commands.show(args.path, args.episode_id, console=_console)


def _cmd_compare(args: argparse.Namespace) -> int:
    from .analytics import commands

    return commands.compare(args.a, args.b or args.a, model_a=args.model_a, model_b=args.model_b, console=_console,
                            allow_different_settings=args.allow_different_settings, config_a=args.config_a, config_b=args.config_b)


def _cmd_view(args: argparse.Namespace) -> int:
    from .view import serve
    from .view.app import is_loopback

    check_port(args.port, "view --port")
    for flag, value in (("--csv-max-rows", args.csv_max_rows), ("--csv-max-mib", args.csv_max_mib)):
        if value < 1:
            raise ConfigError(f"view {flag} {value}: give a positive number")
    if args.export is not None:
        from .view.export import export

        steps: set[int] = set()

        def progress(written: int, total: int) -> None:  # a line per tenth of a big export's transcripts
            step = 10 * written // total
            if total >= 20_000 and step not in steps:
                steps.add(step)
                _err.print(f"agentbench view: {written:,}/{total:,} transcripts written", markup=False)

        done = export(args.paths, args.export, pool=args.pool, progress=progress)
        _err.print(f"agentbench view: {done.text()}", markup=False, soft_wrap=True)  # the address stays one line to copy
        return 0
    if not is_loopback(args.host):
        _err.print(f"warning: listening on {args.host}: anyone who can reach it can read these results", markup=False)
    try:
        eventloop.run(serve(args.paths, args.host, args.port, ready=lambda u: _err.print(f"agentbench view: {u} (Ctrl-C stops)"),
                            pool=args.pool, csv_max_rows=args.csv_max_rows, csv_max_bytes=args.csv_max_mib << 20))
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_envs(args: argparse.Namespace) -> int:
    from .analytics.terminal import print_table
    from .envs import available_envs, make_env, plugin_envs, plugins

    if args.tasks is not None:
        return _list_tasks(args.tasks, args.split, args.data_dir)

    table = Table(title="Environments (built-in task suites; --data-dir runs the official ones)", title_justify="left")
    for col in ("env", "metric", "dev", "test", "turn cap", "tools mode"):
        table.add_column(col, justify="right" if col in ("dev", "test", "turn cap") else "left")
    about: list[tuple[str, str, str]] = []
    unusable: list[str] = []  # plugins that cannot be loaded or are refused: one line each, the others listed
    for name in available_envs() + plugin_envs():
        try:
            env = make_env(name)
        except AgentBenchError as exc:
            unusable.append(str(exc))
            continue
        counts = []
        for split in ("dev", "test"):
            try:
                counts.append(str(env.count(split)))
            except AgentBenchError as exc:
                counts.append("?")
                about.append((name, f"{split} split", str(exc)))
        table.add_row(name, env.metric, *counts, _turn_caps(env), "yes" if env.supports_tools else "no")
        about.append((name, env.description + (f" (plugin from {plugins()[name].package})" if name in plugins() else ""), env.requires))
    print_table(_console, table, keys=1)
    _console.print("turn cap: the most replies an episode gets; 'text / tools' where the action modes differ", highlight=False)
    # the long texts as wrapped paragraphs, not as table cells (they would be a word per line at 80 columns)
    for name, description, needs in about:
        _console.print(f"[bold]{escape(name)}[/]: {escape(description)}", highlight=False)
        _console.print(f"  needs: {escape(needs)}", highlight=False)
    unusable += [f"environment plugin {p.name!r} from {p.package} is refused: {p.refused}" for p in plugins().values() if p.refused]
    for line in unusable:
        _err.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)  # one line each, for grep
    return 0


def _list_tasks(name: str, split: str, data_dir: Path | None) -> int:
    """``envs --tasks ENV``: ENV's task ids of ``split``, one a line on stdout (a file for ``run --task-ids``)."""
    from .config import SPLIT_ALIASES, env_named
    from .envs import make_env

    if data_dir is not None and not data_dir.is_dir():
        raise ConfigError(f"--data-dir {data_dir} is not a directory (point it at AgentBench's data/ folder)")
    env = make_env(env_named(name, "envs --tasks"), data_dir=data_dir)
    for task in env.tasks(SPLIT_ALIASES.get(split, split)):
        print(task.task_id)
    return 0


def _cmd_new_env(args: argparse.Namespace) -> int:
    from .scaffold import new_env

    written = new_env(args.name, args.out)
    _err.print(f"wrote {counted(len(written), 'file')} of environment {args.name} to {args.out}; next: pip install -e '{args.out}[test]' && "
               f"agentbench demo --env {args.name} (its README says what to edit)", markup=False, highlight=False, soft_wrap=True)
    return 0


def _cmd_serve_mock(args: argparse.Namespace) -> int:
    from .mock.server import FAULT_KINDS, MockModelServer, MockOptions

    check_port(args.port, "serve-mock --port")
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    bad = [f for f in faults if f not in FAULT_KINDS]
    if bad:
        raise ConfigError(f"--faults: unknown kind {bad[0]!r} (known: {', '.join(FAULT_KINDS)})")
    if not 0 <= args.fault_rate <= 1:
        raise ConfigError("--fault-rate must be between 0 and 1")
    from .mock.providers import OVERFLOW_SHAPES, REASONING_MODES

    if args.rate_headers and not args.rpm_limit:
        raise ConfigError("--rate-headers: give the limit to enforce with --rpm-limit N")
    if args.overflow_shape and args.overflow_shape not in OVERFLOW_SHAPES:
        raise ConfigError(f"--overflow-shape: unknown server {args.overflow_shape!r} (known: {', '.join(OVERFLOW_SHAPES)})")
    if args.reasoning and args.reasoning not in REASONING_MODES:
        raise ConfigError(f"--reasoning: unknown mode {args.reasoning!r} (known: {', '.join(REASONING_MODES)})")
    env_options: dict[str, dict[str, Any]] = {}
    from .envs.files import load_env_file

    for path in args.env:  # environments of a file: known by their names from now on, in this process
        load_env_file(path)
    _add_env_options(args, env_options)
    options = MockOptions(
        policy=args.policy, latency_ms=args.latency_ms, latency_jitter_ms=args.latency_jitter_ms, fault_rate=args.fault_rate,
        fault_kinds=faults, rpm_limit=args.rpm_limit, rate_headers=args.rate_headers, capacity=args.capacity,
        queue_limit=args.queue_limit, data_dir=args.data_dir, seed=args.seed, env_options=env_options,
        overflow_shape=args.overflow_shape, reasoning=args.reasoning, reasoning_tokens=args.reasoning_tokens,
        batch_delay_s=args.batch_delay,
    )  # fmt: skip

    async def serve() -> None:
        server = MockModelServer(options)
        if args.preload:
            from .envs import available_envs

            for env, loaded in server.preload(args.preload, available_envs()).items():
                _err.print(f"preloaded {env}/{args.preload}: {loaded}")
        try:
            url = await server.start(args.host, args.port)
        except OSError as exc:  # the port is taken (or the address is not this machine's): one line, as view says it
            raise ConfigError(f"serve-mock: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); choose another "
                              "--port (0 picks a free one)") from None
        _err.print(f"mock model serving at {url} (policy {args.policy}); Ctrl-C stops")
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        eventloop.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from .data_pull import pull

    if args.base_url:
        check_http_url(args.base_url, "data pull --base-url")
    kwargs: dict[str, Any] = {"base_url": args.base_url} if args.base_url else {}
    if args.ca_bundle:
        kwargs["ca_bundle"] = args.ca_bundle
    n = eventloop.run(pull(args.dest, console=_err, **kwargs))
    _err.print(f"{n} files verified in {args.dest}; run with --data-dir {args.dest}")
    return 0


_COMMANDS = {
    "run": _cmd_run, "demo": _cmd_demo, "report": _cmd_report, "sql": _cmd_sql, "show": _cmd_show,
    "compare": _cmd_compare, "view": _cmd_view, "envs": _cmd_envs, "serve-mock": _cmd_serve_mock, "data": _cmd_data,
    "new-env": _cmd_new_env, "plan": _cmd_plan,
}  # fmt: skip


def _error_line(exc: Exception) -> str:
    """The one line an error is printed as: without the run's secrets (redacted before it is cut), at most
    ``ERROR_LINE_CHARS`` characters (a message echoing a huge input keeps its start and its end), no line breaks. An
    OSError names its file and what the system said."""
    if isinstance(exc, OSError) and not isinstance(exc, AgentBenchError):
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        text = f"{where}: {exc.strerror or exc}; give a path you can write" if where else str(exc)
    else:
        text = str(exc)
    return excerpt(redact(text).replace("\r", " ").replace("\n", " "), ERROR_LINE_CHARS)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named with the command they were given to, whose --help lists what it takes
        parser.exit(2, f"agentbench {args.command}: error: unrecognized arguments: {' '.join(extra)} (see agentbench "
                       f"{args.command} --help)\n")  # fmt: skip
    try:
        return _COMMANDS[args.command](args)
    except AgentBenchError as exc:
        print(f"error: {_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _err.print("interrupted: what was stored stays; running the same command again resumes", markup=False, highlight=False)
        return 130
    except BrokenPipeError:
        # the reader went away (`agentbench sql ... | head`): what it did not read is dropped, no traceback; stdout
        # points at /dev/null so the interpreter's last flush does not fail again (Python's documented recipe, exit 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as exc:  # a file or folder this command writes or reads that the system refuses (/proc, a full disk, a long name)
        print(f"error: {_error_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if type(exc).__name__ != "InterruptException":  # DuckDB's word for a Ctrl-C that stopped a query: as the one above
            raise
        _err.print("interrupted: what was stored stays; running the same command again resumes", markup=False, highlight=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
