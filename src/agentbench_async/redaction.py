"""The one redaction step: the client's own secrets out of everything the engine stores or prints.

The secrets are what this process sends or was given to reach its servers: the API keys read from the variables a
config names, the user and password of a URL (``base_url``, ``proxy``, ``db_url``, any environment option), the values
of the extra HTTP headers a model sends. They are registered where they are read (``register``, ``register_url``) and
replaced by ``***`` wherever they appear: in error text before it is cut (``redact``), and in every text column of
every row the writer stores (``redact_table``: turns, answers, details, errors, live rows), in the stored run config and
in the CLI's error line. Reports, the HTML report and exports are read from the stored rows, so they hold what the file
holds. A server that echoes a key (a debugging proxy replying with the request, an error body quoting it at any
length) cannot put it in a result file.

Not only whole values: in a text that holds a secret's first or last ``PIECE`` characters (what a cut made before this
step leaves of it: an observation shortened by an environment, a message cut at 300 characters), every run of
``PIECE`` or more characters of a secret is replaced, so a cut does not leave half a key behind. (A piece cut on both
sides, from the middle of a secret, is not searched for: no step of the engine cuts a window that narrow.)
A value shorter than ``MIN_SECRET`` characters is not searched for in free text (it would mask ordinary words); URL
credentials are always masked inside a URL (``bounds.redact_url``).

Cost: nothing when no secret is registered (the mock model, keyless local servers). Otherwise a text is first tested
for those probes (one regex search; a batch's text columns with one RE2 pass each, ~3 ns a byte); only a text that
holds one is walked in Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import unquote

from .bounds import url_userinfo

if TYPE_CHECKING:  # pyarrow is imported where used: the os environment's helpers run without it
    import pyarrow as pa

MASK = "***"
MIN_SECRET = 6  # shorter values are masked inside URLs only
PIECE = 8  # no run of this many characters of a secret survives
_CHUNK = 4  # every run of 7+ characters of a secret holds one of its chunks at offsets 0, 4, 8, ...


class Redactor:
    """The secrets of this process and the replacing of them."""

    def __init__(self) -> None:
        self._secrets: list[str] = []
        self._probes: tuple[str, ...] = ()  # what a text must contain to be walked (register)
        self._probe_re: re.Pattern[str] | None = None

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    def reset(self, secrets: Iterable[str] = ()) -> None:
        """Forget every secret but ``secrets`` (what a test registered, at its end)."""
        self._secrets, self._probes, self._probe_re = [], (), None
        for value in secrets:
            self.register(value)

    def register(self, value: object) -> None:
        """``value`` (a key, a password, a header's value) is a secret from now on; None, non-text and short values are ignored."""
        if not isinstance(value, str) or len(value) < MIN_SECRET or value in self._secrets:
            return
        self._secrets.append(value)
        # a text is walked when it holds a short secret, or the first or the last PIECE characters of a long one: what a
        # whole secret holds, and what a cut leaves of it (its start when the text was cut after it, its end when before)
        probes: list[str] = []
        for secret in self._secrets:
            probes.extend((secret,) if len(secret) < PIECE else (secret[:PIECE], secret[-PIECE:]))
        self._probes = tuple(dict.fromkeys(probes))
        self._probe_re = re.compile("|".join(map(re.escape, self._probes)))

    def register_url(self, url: object) -> None:
        """The user and password of ``url`` (as given and percent-decoded), and the two together, are secrets."""
        if not isinstance(url, str):
            return
        info = url_userinfo(url)
        if info is None:
            return
        password = info.partition(":")[2]
        for value in (info, password, unquote(info), unquote(password)):  # the user alone is no secret (it may be "agentbench")
            self.register(value)

    def text(self, text: str) -> str:
        """``text`` with every secret, and every run of ``PIECE`` or more characters of one, as ``***``."""
        if not self._secrets or not text or self._probe_re is None or self._probe_re.search(text) is None:
            return text
        spans: list[tuple[int, int]] = []
        for secret in self._secrets:
            spans.extend(_runs(text, secret))
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0
        for start, end in _merged(spans):
            out.append(text[pos:start])
            out.append(MASK)
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def value(self, value: Any) -> Any:
        """``value`` (JSON-like: mappings, lists, text) with every text redacted; the same object when nothing changed."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v) for v in value)
        return value

    def table(self, table: pa.Table) -> pa.Table:
        """``table`` with every text column redacted: one RE2 pass a column finds the rows that may hold a secret, only
        those are redacted in Python (none, in a run whose servers echo nothing of the client's)."""
        if not self._secrets or table.num_rows == 0:
            return table
        import pyarrow as pa
        import pyarrow.compute as pc

        pattern = "|".join(map(_re2_literal, self._probes))
        for i, column_field in enumerate(table.schema):
            if not (pa.types.is_string(column_field.type) or pa.types.is_large_string(column_field.type)):
                continue
            column = table.column(i)
            hits = pc.match_substring_regex(column, pattern)
            if not pc.any(hits).as_py():
                continue
            values = column.to_pylist()
            flags = hits.to_pylist()
            redacted = [self.text(v) if hit and v is not None else v for v, hit in zip(values, flags)]
            table = table.set_column(i, column_field, pa.array(redacted, column_field.type))
        return table


def _runs(text: str, secret: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that are runs of ``PIECE``+ characters of ``secret`` (the whole of a short one)."""
    if len(secret) < PIECE:
        spans, start = [], text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
        return spans
    spans = []
    n, m = len(text), len(secret)
    for offset in range(0, m - _CHUNK + 1, _CHUNK):
        chunk = secret[offset : offset + _CHUNK]
        at = text.find(chunk)
        while at != -1:
            left, s_left = at, offset
            while left > 0 and s_left > 0 and text[left - 1] == secret[s_left - 1]:
                left, s_left = left - 1, s_left - 1
            right, s_right = at + _CHUNK, offset + _CHUNK
            while right < n and s_right < m and text[right] == secret[s_right]:
                right, s_right = right + 1, s_right + 1
            if right - left >= PIECE:
                spans.append((left, right))
            at = text.find(chunk, at + 1)
    return spans


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _re2_literal(text: str) -> str:
    """``text`` as an RE2 pattern matching it literally (every character but ASCII letters and digits as ``\\x{...}``)."""
    return "".join(ch if ch.isascii() and ch.isalnum() else f"\\x{{{ord(ch):x}}}" for ch in text)


SECRETS = Redactor()  # this process's secrets (each worker process registers its own where it reads them)


def register(value: object) -> None:
    """A secret of this process from now on (``Redactor.register``)."""
    SECRETS.register(value)


def register_url(url: object) -> None:
    """The credentials of ``url`` are secrets of this process from now on (``Redactor.register_url``)."""
    SECRETS.register_url(url)


def redact(text: str) -> str:
    """``text`` without this process's secrets (``Redactor.text``): call it before any cut."""
    return SECRETS.text(text)


class RedactedStream:
    """A text stream writing to ``stream()`` (looked up at each write: a redirected or captured stderr) with this process's
    secrets redacted: the console a run prints its progress, warnings and end-of-run lines on."""

    def __init__(self, stream: Callable[[], TextIO]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream().write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self._stream(), name)


def redact_table(table: pa.Table) -> pa.Table:
    """``table``'s text columns without this process's secrets (``Redactor.table``): what the writer stores."""
    return SECRETS.table(table)
