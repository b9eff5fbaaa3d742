"""Making an episode storable: a value its DuckDB column cannot hold becomes null, and the episode's error says so.

The writer builds its Arrow tables from the records as they are (the fast path). When that fails — text with a
lone surrogate (not UTF-8), an integer beyond its column's range, ``NaN`` in the JSON details, a value of the
wrong type — the batch's records go through ``make_storable``: each value is checked against its column's
type (read from the file itself, so columns added later are covered), the ones that do not fit are set to
null, and the episode's ``error`` names them (``stored with null in place of: turns[3].content (not valid
UTF-8)``). The episode is stored; the run goes on.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import Any

import duckdb

from ..records import CallRow, EpisodeRecord, TurnRow

_INT_RANGES = {"TINYINT": 2**7, "SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}
_TABLES = (("episodes", EpisodeRecord), ("turns", TurnRow), ("model_calls", CallRow))
_MAX_NAMED = 5


def column_types(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """``{table: {column: DuckDB type}}`` of the tables an episode is stored in."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND table_name IN ('episodes', 'turns', 'model_calls')"
    ).fetchall()
    types: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        types.setdefault(table, {})[column] = data_type
    return types


def problem(value: Any, sql_type: str) -> str | None:
    """Why ``value`` (as a record holds it) cannot go into a column of ``sql_type``; None if it can."""
    if value is None:
        return None
    if sql_type == "VARCHAR":
        if not isinstance(value, str):
            return f"{type(value).__name__}, not text"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "not valid UTF-8"
        return None
    if sql_type in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{type(value).__name__}, not an integer"
        limit = _INT_RANGES[sql_type]
        return None if -limit <= value < limit else f"{_short(value)} does not fit {sql_type}"
    if sql_type == "DOUBLE":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{type(value).__name__}, not a number"
        try:
            float(value)
        except OverflowError:
            return f"{_short(value)} does not fit DOUBLE"
        return None
    if sql_type == "BOOLEAN":
        return None if isinstance(value, bool) else f"{type(value).__name__}, not a boolean"
    if sql_type.startswith("TIMESTAMP"):  # records hold Unix seconds
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and abs(value) < 2**62 / 1e6
        return None if ok else f"{_short(value)} is not a time"
    if sql_type == "JSON":
        return _json_problem(value)
    return None


def details_json(details: Any) -> str:
    """An episode's details as strict JSON text (``NaN``/``Infinity`` are not JSON: ValueError)."""
    return _DETAILS.encode(details)


# json.dumps(details, default=str, allow_nan=False) builds this encoder anew on every call (once an episode)
_DETAILS = json.JSONEncoder(default=str, allow_nan=False)


def _json_problem(value: Any) -> str | None:
    try:
        text = value if isinstance(value, str) else details_json(value)
        if isinstance(value, str):
            json.loads(text)
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid UTF-8"
    except ValueError:  # json.dumps(allow_nan=False) and json.loads both raise it
        return "NaN, Infinity or text that is not JSON"
    except (TypeError, RecursionError) as exc:
        return f"not JSON ({type(exc).__name__})"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _fix(row: Any, where: str, types: dict[str, str], names: tuple[str, ...], notes: list[str]) -> None:
    for name in names:
        sql_type = types.get(name)
        if sql_type is None:
            continue
        why = problem(getattr(row, name), sql_type)
        if why is not None:
            setattr(row, name, None)
            notes.append(f"{where}{name} ({why})")


_FIELDS = {cls: tuple(f.name for f in fields(cls) if f.name not in ("turns", "calls")) for _, cls in _TABLES}


def make_storable(record: EpisodeRecord, types: dict[str, dict[str, str]]) -> EpisodeRecord:
    """``record`` with every value its column cannot hold set to null (in place), named in its ``error``."""
    notes: list[str] = []
    _fix(record, "", types.get("episodes", {}), _FIELDS[EpisodeRecord], notes)
    if record.details is None:
        record.details = {}
    for i, turn in enumerate(record.turns):
        _fix(turn, f"turns[{i}].", types.get("turns", {}), _FIELDS[TurnRow], notes)
    for i, call in enumerate(record.calls):
        _fix(call, f"model_calls[{i}].", types.get("model_calls", {}), _FIELDS[CallRow], notes)
    if notes:
        named = ", ".join(notes[:_MAX_NAMED]) + (f" and {len(notes) - _MAX_NAMED} more" if len(notes) > _MAX_NAMED else "")
        said = f"stored with null in place of values DuckDB cannot hold: {named}"
        record.error = f"{record.error}; {said}" if record.error else said
    return record


def storable_turns(rows: list[TurnRow], types: dict[str, dict[str, str]]) -> list[TurnRow]:
    """Turn rows of a running episode made storable (the episode's error names them when it finishes)."""
    notes: list[str] = []
    for row in rows:
        _fix(row, "", types.get("turns", {}), _FIELDS[TurnRow], notes)
    return rows
