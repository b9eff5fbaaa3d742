"""Numbers, durations and times as people read them in messages, tables and pages."""

from __future__ import annotations

from datetime import datetime


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 episode``, ``2 episodes``, ``1,204 retries`` (``plural`` when adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def duration(seconds: float | None) -> str:
    """``0.4 s``, ``47 s``, ``12m05s``, ``2h03m``; a dash when unknown."""
    if seconds is None or seconds != seconds:
        return "–"
    whole = int(round(seconds))
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m" if whole >= 3600 else f"{whole // 60}m{whole % 60:02d}s"


def moment(value: datetime | None) -> str:
    """A time to the second (``2025-03-01 12:00:05``); a dash when unknown."""
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")
