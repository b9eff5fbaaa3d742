"""Numbers as people read them in messages and tables."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 episode``, ``2 episodes``, ``1,204 retries`` (``plural`` when adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
