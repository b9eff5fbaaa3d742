"""Result files with known outcomes, written through the store schema (the engine's contract).

The fixtures using these are in this folder's conftest.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb

from agentbench_async.store.schema import create_schema

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)

# (status, success, score, error) per known episode; see test_reports.py for the numbers they give.
ALPHA_OS = [
    ("completed", True, 1.0, None),
    ("completed", True, 1.0, None),
    ("completed", True, 1.0, None),
    ("completed", True, 1.0, None),
    ("completed", False, 0.0, None),
    ("completed", False, 0.0, None),
    ("invalid_format", False, 0.0, "no action found in reply 1"),
    ("invalid_action", False, 0.0, "unknown command 'rm -rf /'"),
    ("task_limit_exceeded", False, 0.0, "turn limit reached"),
    ("env_error", False, 0.0, "container failed to start"),
]
BETA_OS = [
    ("completed", True, 1.0, None),
    ("completed", False, 0.0, None),
    ("completed", False, 0.0, None),
    ("completed", False, 0.0, None),
    ("invalid_format", False, 0.0, "no action found in reply 2"),
    ("invalid_format", False, 0.0, "no action found in reply 3"),
    ("context_limit_exceeded", False, 0.0, "prompt too long: 9000 tokens"),
    ("task_limit_exceeded", False, 0.0, "turn limit reached"),
    ("completed", False, 0.0, None),
    ("model_error", False, 0.0, "HTTP 500 after 5 retries"),
]
ALPHA_KG = [
    ("completed", True, 1.0, None),
    ("completed", False, 0.5, None),
    ("completed", False, 0.25, None),
    ("completed", False, 0.0, None),
    ("context_limit_exceeded", False, 0.0, "prompt too long"),
    ("cancelled", False, 0.0, "interrupted"),
]


# The columns of result files written by the first release (later columns are NULL in such files).
_TURN_COLUMNS = "run_id, episode_id, turn, seq, role, content, action, observation, valid, error, tool_calls, created_at"
_CALL_COLUMNS = ("run_id, episode_id, turn, attempt, http_status, latency_ms, input_tokens, output_tokens, error, caller, "
                 "model, finish_reason, started_at, retry_after_s")
_EPISODE_COLUMNS = (
    "run_id", "episode_id", "model", "env", "split", "task_id", "repeat", "status", "score", "success", "n_turns",
    "input_tokens", "output_tokens", "started_at", "finished_at", "error", "details", "source", "action_mode",
    "fingerprint",
)


def _insert_episode(
    con: duckdb.DuckDBPyConnection, run_id: str, model: str, env: str, index: int, outcome: tuple[str, bool, float, str | None],
    *, repeat: int = 0, n_turns: int | None = None, fingerprint: str = "fp1", when: datetime = T0,
    paper_status: str | None = None, legacy: bool = False,
) -> str:
    status, success, score, error = outcome
    task_id = f"t{index:03d}"
    episode_id = f"{model}/{env}/test/{task_id}/{repeat}"
    turns = n_turns if n_turns is not None else 1 + index % 4
    started = when + timedelta(seconds=index)
    columns = [*_EPISODE_COLUMNS] if legacy else [*_EPISODE_COLUMNS, "paper_status"]
    values = [run_id, episode_id, model, env, "test", task_id, repeat, status, score, success, turns, 100 * turns,
              10 * turns, started, started + timedelta(seconds=2), error, json.dumps({"i": index}), "builtin", "text",
              fingerprint]
    con.execute(
        f"INSERT INTO episodes ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
        values if legacy else [*values, paper_status],
    )
    seq = 0
    con.execute(f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES (?, ?, 0, ?, 'user', ?, NULL, NULL, NULL, NULL, NULL, ?)",
                [run_id, episode_id, seq, f"Task {task_id}: do the thing", started])
    for turn in range(1, turns + 1):
        last = turn == turns
        seq += 1
        reply = f"Think step {turn}. Act: do({turn})" if not (last and status in ("invalid_format", "invalid_action")) else f"bad reply {index}"
        valid = not (last and status in ("invalid_format", "invalid_action"))
        con.execute(
            f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES (?, ?, ?, ?, 'assistant', ?, ?, ?, ?, ?, NULL, ?)",
            [run_id, episode_id, turn, seq, reply, f"do({turn})", f"ok {turn}", valid, None if valid else error,
             started + timedelta(milliseconds=100 * turn)],
        )
        for attempt in (1, 2) if (turn == 1 and index % 3 == 0) else (1,):
            http = 429 if attempt == 1 and turn == 1 and index % 3 == 0 else 200
            con.execute(
                f"INSERT INTO model_calls ({_CALL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'agent', ?, 'stop', ?, ?)",
                [run_id, episode_id, turn, attempt, http, 50.0 + 10 * turn + index, 100 if http == 200 else None,
                 10 if http == 200 else None, None if http == 200 else "HTTP 429 rate limited", model,
                 started + timedelta(milliseconds=100 * turn), 1.5 if http == 429 else None],
            )
    return episode_id


WriteRun = Callable[..., Path]


def writer(folder: Path) -> WriteRun:
    """write(name, {(model, env): [outcomes]}, repeats=1, config=None, fingerprint="fp1") -> path.

    ``paper_statuses``: per (model, env), the paper status stored for each outcome (the environment's);
    ``legacy``: write the file as a version before ``episodes.paper_status`` existed (no such column)."""

    def write(name: str, cells: dict[tuple[str, str], list[tuple[str, bool, float, str | None]]], *, repeats: int = 1,
              config: dict[str, Any] | None = None, fingerprint: str = "fp1", run_id: str | None = None,
              path: Path | None = None, paper_statuses: dict[tuple[str, str], list[str | None]] | None = None,
              legacy: bool = False) -> Path:
        path = path or folder / f"{name}.duckdb"
        con = duckdb.connect(str(path))
        create_schema(con)
        if legacy:
            con.execute("DROP VIEW IF EXISTS episode_outcomes CASCADE")
            con.execute("ALTER TABLE episodes DROP COLUMN paper_status")
        con.begin()
        run_id = run_id or f"run-{name}"
        con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, 'run', '0.1.0', ?, false)",
            [run_id, T0, json.dumps(config or {"models": [{"name": m} for m in sorted({m for m, _ in cells})]}),
             fingerprint, T0 + timedelta(minutes=5)],
        )
        for (model, env), outcomes in cells.items():
            for repeat in range(repeats):
                for i, outcome in enumerate(outcomes):
                    paper = (paper_statuses or {}).get((model, env), [None] * len(outcomes))[i]
                    _insert_episode(con, run_id, model, env, i, outcome, repeat=repeat, fingerprint=fingerprint,
                                    paper_status=paper, legacy=legacy)
        con.commit()
        con.close()
        return path

    return write


# mind2web as the engine stores it: each round the model's reply, then the next round asked anew (the prompt file's
# example in the assistant role, then the question). Used to check that examples are never taken for the reply.
MIND2WEB_EXAMPLE = "Thought: The film page is open; the 21:15 showing button comes next.\nAnswer: D."
MIND2WEB_REPLY = "Thought: none of these.\nAnswer: A."


def mind2web_rounds(write: WriteRun, *, marked: bool, name: str = "m2w") -> tuple[Path, str]:
    """A file with one mind2web episode of two rounds; ``marked``: with turns.injected (else a file written before
    the column: NULL). Returns the file and the episode id."""
    path = write(name, {("alpha", "mind2web"): [("invalid_action", False, 0.0, "no round picked a candidate")]},
                 config={"models": [{"name": "alpha"}]})
    con = duckdb.connect(str(path))
    ep = con.execute("SELECT episode_id FROM episodes").fetchone()[0]  # type: ignore[index]
    con.execute("DELETE FROM turns")
    con.execute("UPDATE episodes SET n_turns = 2")
    rows = [(0, "user", "page 1, question"), (0, "assistant", MIND2WEB_EXAMPLE), (0, "user", "page 2, question"),
            (1, "assistant", MIND2WEB_REPLY), (1, "user", "example page"), (1, "assistant", MIND2WEB_EXAMPLE),
            (1, "user", "page 3, question"), (2, "assistant", MIND2WEB_REPLY + " (round 2)"),
            (2, "user", "example page"), (2, "assistant", MIND2WEB_EXAMPLE), (2, "user", "page 4, question")]  # fmt: skip
    for seq, (turn, role, content) in enumerate(rows):
        injected = (role == "assistant" and content == MIND2WEB_EXAMPLE) if marked else None
        con.execute("INSERT INTO turns (run_id, episode_id, turn, seq, role, content, injected, created_at) VALUES "
                    f"('run-{name}', ?, ?, ?, ?, ?, ?, ?)", [ep, turn, seq, role, content, injected, T0 + timedelta(seconds=seq)])
    con.close()
    return path, ep


# The same kg tasks played twice by alpha: with AgentBench's history (and os), then (--new-run) with --history full.
KG_FULL = [("completed", True, 1.0, None), ("completed", True, 1.0, None), ("completed", False, 0.5, None), ("completed", False, 0.0, None)]


def run_config(history: str, models: tuple[str, ...] = ("alpha",)) -> dict[str, Any]:
    return {"models": [{"name": m} for m in models], "history": history, "split": "test", "envs": ["kg", "os"], "seed": 0}


def two_configurations(write: WriteRun, name: str = "fp") -> Path:
    """alpha on kg in two configurations (fingerprints aaaa1111: history agentbench, with os too; bbbb2222: full)."""
    path = write(name, {("alpha", "kg"): ALPHA_KG, ("alpha", "os"): ALPHA_OS}, config=run_config("agentbench"), fingerprint="aaaa1111",
                 run_id="run-agentbench")
    return write(name, {("alpha", "kg"): KG_FULL}, config=run_config("full"), fingerprint="bbbb2222", run_id="run-full", path=path)


# Episodes with exactly these replies (behaviour tests: loops, stalls, recovery): (action, observation, valid) per reply
Script = list[tuple[str, str, bool]]


def scripted(write_run: WriteRun, episodes: list[tuple[str, bool, Script]], *, env: str = "webshop", name: str = "b",
              injected: bool | None = False, example: str | None = None) -> tuple[Path, list[str]]:
    """A file whose episodes (status, success, script) have exactly these replies. ``example``: an assistant message
    the environment wrote after each reply (marked injected, or NULL like a file written before the column)."""
    path = write_run(name, {("alpha", env): [(status, success, 1.0 if success else 0.0, None) for status, success, _ in episodes]},
                     config={"models": [{"name": "alpha"}]})
    con = duckdb.connect(str(path))
    ids = [r[0] for r in con.execute("SELECT episode_id FROM episodes ORDER BY task_id").fetchall()]
    con.execute("DELETE FROM turns")
    for episode_id, (_, _, script) in zip(ids, episodes):
        con.execute("UPDATE episodes SET n_turns = ? WHERE episode_id = ?", [len(script), episode_id])
        rows = [(0, "user", "the task", None, None, None, False)]
        for turn, (action, observation, valid) in enumerate(script, 1):
            rows.append((turn, "assistant", f"Thought: hmm.\nAction: {action}", action, observation, valid, injected))
            rows.append((turn, "user", observation, None, None, None, injected if injected is None else False))
            if example is not None:
                rows.append((turn, "assistant", example, example, None, True, True if injected is not None else None))
        for seq, (turn, role, content, action, observation, valid, marked) in enumerate(rows):
            con.execute("INSERT INTO turns (run_id, episode_id, turn, seq, role, content, action, observation, valid, injected, "
                        "created_at) VALUES ('run-' || ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [name, episode_id, turn, seq, role, content, action, observation, valid, marked, T0 + timedelta(seconds=seq)])
    con.close()
    return path, ids
