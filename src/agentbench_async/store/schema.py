"""The DuckDB schema (a contract: add columns at the end, never rename).

``episodes`` has exactly one row per finished episode (``episode_id`` is unique within a config
fingerprint); ``turns`` and ``model_calls`` hold that episode's messages and HTTP attempts. The three are
written in the same transaction, so a crash never leaves half an episode.

An episode run again after an infrastructure failure (retried within the run, or re-run by a resume) keeps
its earlier attempts: the transaction that stores the new attempt moves the earlier one's rows into
``episode_attempts``, ``attempt_turns`` and ``attempt_calls`` (the columns of ``episodes``, ``turns`` and
``model_calls`` plus ``ATTEMPT_COLUMNS``), so the three main tables keep one attempt per episode, the final
one, which is what the views score; ``episodes.attempts`` counts the attempts it took.
"""

from __future__ import annotations

import duckdb

from ..resources import analytics_dir
from .live import create_live_turns

TABLES_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       VARCHAR PRIMARY KEY,
    created_at   TIMESTAMPTZ NOT NULL,
    config       JSON NOT NULL,         -- the resolved run config; API keys never (only the variable names)
    fingerprint  VARCHAR NOT NULL,      -- hash of what decides results; same fingerprint = resumable
    command      VARCHAR,               -- run | demo
    version      VARCHAR,               -- agentbench-async version
    finished_at  TIMESTAMPTZ,           -- set when the run ended (normally or by SIGINT)
    interrupted  BOOLEAN
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id        VARCHAR NOT NULL,
    episode_id    VARCHAR NOT NULL,     -- '<model>/<env>/<split>/<task_id>/<repeat>'
    model         VARCHAR NOT NULL,
    env           VARCHAR NOT NULL,
    split         VARCHAR NOT NULL,
    task_id       VARCHAR NOT NULL,
    repeat        INTEGER NOT NULL,
    status        VARCHAR NOT NULL,     -- completed | context_limit_exceeded | invalid_format | invalid_action
                                        -- | task_limit_exceeded | env_error | model_error | cancelled
    score         DOUBLE,               -- the environment's metric for this episode
    success       BOOLEAN,
    n_turns       INTEGER,              -- model replies received
    input_tokens  BIGINT,               -- agent calls only (judge calls are in model_calls)
    output_tokens BIGINT,
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ,
    error         VARCHAR,              -- why it ended this way (parser message, HTTP error, env failure)
    details       JSON,                 -- environment-specific outcome details
    source        VARCHAR,              -- builtin | official
    action_mode   VARCHAR,              -- text | tools
    fingerprint   VARCHAR,
    paper_status  VARCHAR,              -- what AgentBench v0.2 would have recorded (its SampleStatus words:
                                        -- completed | agent context limit | agent validation failed | agent
                                        -- invalid action | task limit reached | task error | unknown); NULL
                                        -- for cancelled episodes and in files written before the column existed
    attempts      INTEGER               -- attempts this episode took, this one included: 1 = first; 2.. = it was run again
                                        -- after an infrastructure failure (within the run, or by a resume), the earlier
                                        -- ones kept in episode_attempts; NULL in files written before the column existed
);
CREATE TABLE IF NOT EXISTS turns (
    run_id       VARCHAR NOT NULL,
    episode_id   VARCHAR NOT NULL,
    turn         INTEGER NOT NULL,      -- model turn the message belongs to (0 = the initial prompt)
    seq          INTEGER NOT NULL,      -- order of messages within the episode
    role         VARCHAR NOT NULL,      -- system | user | assistant | tool
    content      VARCHAR,
    action       VARCHAR,               -- assistant rows: the parsed action
    observation  VARCHAR,               -- assistant rows: what the environment answered
    valid        BOOLEAN,               -- assistant rows: was the action well-formed and executable
    error        VARCHAR,               -- assistant rows: why not
    tool_calls   JSON,                  -- assistant rows in tools mode
    created_at   TIMESTAMPTZ,
    reasoning    VARCHAR,               -- assistant rows: the model's thinking, separated from content
    injected     BOOLEAN,               -- TRUE: the environment wrote this message, not as its answer to the model
                                        -- but as set-up that can read like the model's words: few-shot examples
                                        -- and acknowledgements in the assistant role, rules re-inserted (never the
                                        -- model's reply); FALSE: the model's own reply, or the environment's prompt
                                        -- or observation; NULL in files written before the column existed (the
                                        -- views then take the first row of each turn >= 1 as the model's reply)
    think_removed BOOLEAN               -- assistant rows: TRUE when a <think> block was cut out of the content before
                                        -- the environment read it (reasoning_handling: separate); AgentBench v0.2
                                        -- parsed the whole content. NULL in files written before the column existed
);
CREATE TABLE IF NOT EXISTS model_calls (
    run_id        VARCHAR NOT NULL,
    episode_id    VARCHAR NOT NULL,
    turn          INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,     -- 1 = first try, 2.. = retries
    http_status   INTEGER,              -- NULL when no HTTP answer (timeout, connection reset)
    latency_ms    DOUBLE,
    input_tokens  BIGINT,               -- the whole prompt, cached parts included (Anthropic: input_tokens +
                                        -- cache_read_input_tokens + cache_creation_input_tokens)
    output_tokens BIGINT,
    error         VARCHAR,
    caller        VARCHAR,              -- agent | judge
    model         VARCHAR,
    finish_reason VARCHAR,
    started_at    TIMESTAMPTZ,
    retry_after_s DOUBLE,               -- the server's Retry-After, when it sent one
    reasoning_tokens BIGINT,            -- output tokens spent thinking, when the server reports them
    limit_kind    VARCHAR,              -- context_window | output_budget: the limit this call ran into
    limit_basis   VARCHAR,              -- how that was decided (server error shape, finish reason, usage)
    cache_read_tokens  BIGINT,          -- input tokens read from the provider's prompt cache (part of input_tokens)
    cache_write_tokens BIGINT,          -- input tokens written to the cache (Anthropic; part of input_tokens)
    batch_id      VARCHAR,              -- the provider batch (OpenAI Batch API / Anthropic Message Batches) that
                                        -- carried the request; NULL for a direct call
    note          VARCHAR,              -- what the client repaired or dropped in a reply it accepted: a usage count
                                        -- that is not a count (stored as NULL), lone surrogates replaced
    in_flight_limit INTEGER,            -- the model's in-flight cap after this answer (max_in_flight: auto adapts it)
    rpm_limit     INTEGER,              -- requests/min paced to after this answer (configured, or the server's headers)
    tpm_limit     BIGINT,               -- tokens/min paced to after this answer; NULL: none known
    queue_ms      DOUBLE,               -- waited in the engine's limiter before it was sent (in-flight cap, requests
                                        -- or tokens per minute, a 429's pause); not part of latency_ms
    server_queue_ms DOUBLE              -- of latency_ms, waited in the server's queue where the server says so
                                        -- (text-generation-inference's x-queue-time; llama.cpp: latency less its
                                        -- timings); NULL: the server does not say
);
-- Batch mode (--batch): every batch is recorded before it is created, so a resumed run collects the batches
-- it already paid for instead of submitting their requests again.
CREATE TABLE IF NOT EXISTS batches (
    local_id      VARCHAR NOT NULL,     -- the engine's name for the batch, recorded before submission
    run_id        VARCHAR NOT NULL,
    fingerprint   VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    provider      VARCHAR NOT NULL,     -- openai | anthropic
    n_requests    INTEGER,
    created_at    TIMESTAMPTZ,
    input_file_id VARCHAR,              -- OpenAI: the uploaded JSONL file (a batch created from it is found again)
    batch_id      VARCHAR,              -- the provider's id, once created
    status        VARCHAR,              -- submitting | submitted | the provider's final word | not_submitted
    ended_at      TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS batch_requests (
    local_id      VARCHAR NOT NULL,
    custom_id     VARCHAR NOT NULL,     -- the request's id inside the batch
    request_key   VARCHAR NOT NULL,     -- hash of episode, caller, turn and request body: the same request on resume
    episode_id    VARCHAR NOT NULL,
    turn          INTEGER,
    caller        VARCHAR,
    attempt       INTEGER
);
"""


# Columns added after a table was first released: (table, column, type). A file written by an older
# version gets them (NULL in its old rows) when a run opens it for writing.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("episodes", "paper_status", "VARCHAR"),
    ("turns", "reasoning", "VARCHAR"),
    ("model_calls", "reasoning_tokens", "BIGINT"),
    ("model_calls", "limit_kind", "VARCHAR"),
    ("model_calls", "limit_basis", "VARCHAR"),
    ("model_calls", "cache_read_tokens", "BIGINT"),
    ("model_calls", "cache_write_tokens", "BIGINT"),
    ("model_calls", "batch_id", "VARCHAR"),
    ("turns", "injected", "BOOLEAN"),
    ("model_calls", "in_flight_limit", "INTEGER"),
    ("model_calls", "rpm_limit", "INTEGER"),
    ("model_calls", "tpm_limit", "BIGINT"),
    ("model_calls", "queue_ms", "DOUBLE"),
    ("model_calls", "server_queue_ms", "DOUBLE"),
    ("turns", "think_removed", "BOOLEAN"),
    ("episodes", "attempts", "INTEGER"),
)

# Earlier attempts of episodes run again (retried within the run, or re-run by a resume): table -> the table
# whose rows it keeps. Each has that table's columns plus ATTEMPT_COLUMNS.
ATTEMPT_TABLES: dict[str, str] = {"episode_attempts": "episodes", "attempt_turns": "turns", "attempt_calls": "model_calls"}
ATTEMPT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("episode_attempt", "INTEGER", "which attempt of the episode these rows belong to (1 = first)"),
    ("superseded_at", "TIMESTAMPTZ", "when a later attempt replaced it"),
    ("superseded_by", "VARCHAR", "the run (run_id) whose attempt replaced it: the same run for a retry within the run, a "
     "later one for a resume"),
)


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables (idempotent, ``live_turns`` too: views read it), add columns newer than the file,
    (re)create the analytics views."""
    con.execute(TABLES_DDL)
    for table, column, sql_type in ADDED_COLUMNS:
        con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {sql_type}")
    _create_attempt_tables(con)
    create_live_turns(con)
    create_views(con)


def attempt_extra_columns() -> str:
    """``ATTEMPT_COLUMNS`` as NULL select items (``, NULL::INTEGER AS episode_attempt, ...``)."""
    return "".join(f", NULL::{sql_type} AS {column}" for column, sql_type, _ in ATTEMPT_COLUMNS)


def _create_attempt_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The tables of earlier attempts, made from their main tables' columns (and given any column added to those since)."""
    for table, source in ATTEMPT_TABLES.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT *{attempt_extra_columns()} FROM {source} WHERE false")
        have = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND database_name = current_database() "
                                          "AND schema_name = current_schema()", [table]).fetchall()}  # fmt: skip
        for column, sql_type in con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                                            "AND database_name = current_database() AND schema_name = current_schema() ORDER BY column_index",
                                            [source]).fetchall():  # fmt: skip
            if column not in have:
                con.execute(f'ALTER TABLE {table} ADD COLUMN "{column}" {sql_type}')


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create every view in ``analytics/*.sql``, in file-name order (files may build on earlier ones).

    Views are recreated on every open, so old run files get the current analytics rules.
    """
    for path in sorted(analytics_dir().glob("*.sql")):
        con.execute(path.read_text(encoding="utf-8"))
