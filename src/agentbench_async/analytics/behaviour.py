"""How the model failed, not only which class: loops, stalls and recovery after a refused action, per model x
environment x configuration (the ``episode_behaviour`` and ``behaviour_summary`` views of analytics/45_behaviour.sql)."""

from __future__ import annotations

from typing import Any

import polars as pl

from .failures import KEYS
from .loading import Results

BEHAVIOURS: tuple[str, ...] = ("looping", "stalled", "gave_up_early", "recovered", "none")
EXAMPLE_KINDS: tuple[str, ...] = ("looping", "stalled", "recovered", "unrecovered")
NOTE = ("looping = a failed episode that repeated the same action 3 times in a row or a cycle of 2 or 3 actions; "
        "stalled = a failed episode whose last 3+ replies drew nothing new from the environment; recovered = a valid "
        "action after the environment refused one. Evidence per episode: the episode_behaviour view.")  # fmt: skip


def behaviour_table(res: Results) -> pl.DataFrame:
    """``behaviour_summary`` rows of the model x env x configurations that had task-limit episodes or refused
    actions (the others have nothing to say about how they failed), in key order."""
    table = res.behaviour_summary
    return table.filter((pl.col("tle_episodes") > 0) | (pl.col("episodes_with_errors") > 0)).sort(KEYS)


def share_text(part: int, whole: int) -> str:
    """``'7 of 25 (28%)'``; a dash when there is nothing to share."""
    return "–" if not whole else f"{part} of {whole} ({100 * part / whole:.0f}%)"


def recovery_text(row: dict[str, Any]) -> str:
    """A ``behaviour_summary`` row's recovery after a refused action: ``'3 of 14 (21%)'``; where every refused action
    ended its episode (db, os: as upstream) there was nothing to recover in, and it says so."""
    if row.get("episodes_with_errors") and row.get("recovery_possible") is False:
        return "– (a refused action ends the episode)"
    return share_text(row["recovered"], row["episodes_with_errors"])


def examples(row: dict[str, Any], per_kind: int = 3) -> list[tuple[str, dict[str, Any]]]:
    """(kind, example) of a ``behaviour_summary`` row: up to ``per_kind`` each of its looping, stalled, recovered and
    unrecovered episodes (each with episode_id, run_id, evidence), in that order."""
    return [(kind, example) for kind in EXAMPLE_KINDS for example in (row.get(f"{kind}_examples") or [])[:per_kind]]
