"""Bounds on what the engine reads from outside: config files (size, nesting depth), HTTP bodies (read
incrementally up to a cap), and the shape of ports and URLs the user gives. A value past a bound is one line
naming the input and the fix (``ConfigError``), or a typed error the caller turns into its own status."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .errors import ConfigError

if TYPE_CHECKING:  # aiohttp and yaml are imported where used: the os environment runs without them (Debian's python3)
    import aiohttp

MIB = 1 << 20
MAX_CONFIG_BYTES = 4 * MIB  # a run's config file (its task files are read on their own)
MAX_CONFIG_DEPTH = 64  # nested mappings/lists of a config file (a real one nests fewer than 10)
DEFAULT_MAX_RESPONSE_BYTES = 64 * MIB  # one model HTTP response body (models[].max_response_bytes)
_CHUNK = 1 << 16


class BodyTooLarge(Exception):
    """An HTTP body larger than its cap: reading stopped at the cap (``declared``: a Content-Length past it)."""

    def __init__(self, cap: int, declared: int | None) -> None:
        said = f"Content-Length {declared:,}" if declared is not None else f"more than {cap:,} bytes sent"
        super().__init__(f"response body larger than the {cap:,}-byte cap ({said})")
        self.cap = cap


def mib(n: int) -> str:
    """``n`` bytes as the MiB a message names (``64 MiB``)."""
    return f"{n / MIB:g} MiB"


async def read_body(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body of ``resp``, read a chunk at a time; more than ``cap`` bytes (after decompression, so a
    compressed bomb counts at its size) raise ``BodyTooLarge`` without reading further."""
    declared = resp.content_length
    if declared is not None and declared > cap:
        raise BodyTooLarge(cap, declared)
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge(cap, None)
        parts.append(chunk)
    return b"".join(parts)


def read_config_text(path: Path, what: str = "config file") -> str:
    """A config file's text: at most ``MAX_CONFIG_BYTES`` read (``--config /dev/zero`` ends at once), UTF-8."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {mib(MAX_CONFIG_BYTES)}, too big for a {what}; give the YAML file of the run's settings")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line} is not UTF-8 (byte 0x{data[exc.start]:02x}); save the {what} as UTF-8") from None


def check_yaml_depth(text: str, path: Path) -> None:
    """Refuse YAML (or JSON) nested deeper than ``MAX_CONFIG_DEPTH`` before it is built: PyYAML's event parser is not
    recursive, its constructor is (a 100k-deep document would end in a RecursionError)."""
    depth = 0
    import yaml

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_CONFIG_DEPTH:
                raise ConfigError(f"{path}: line {event.start_mark.line + 1} nests deeper than {MAX_CONFIG_DEPTH} mappings/lists; "
                                  "a run's settings need a few levels, flatten it")  # fmt: skip
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def check_port(port: int, flag: str) -> None:
    """A TCP port a command listens on: 0 (any free one) to 65535."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{flag} {port}: not a TCP port; give 1-65535 (0 picks a free one)")


def url_problem(url: str) -> str | None:
    """Why ``url``'s host or port does not parse (``http://[::1``, port 99999), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of 0-65535 or not a number
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    return None if parts.hostname else "names no host"


def check_http_url(url: object, where: str) -> None:
    """An http(s) URL whose host and port parse (``http://[::1`` and port 99999 are refused here, not mid-run)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: {url!r} is not an http(s) URL")
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(f"{where}: {redact_url(url)!r} {problem}; write it as http(s)://HOST[:PORT]/PATH (an IPv6 host in "
                          "brackets: http://[::1]:8000/v1)")  # fmt: skip


def redact_url(url: str) -> str:
    """``http://user:secret@host:3128`` -> ``http://***@host:3128`` (credentials are never stored or printed); a URL
    that does not parse keeps nothing after the ``@``'s left side either."""
    scheme, sep, rest = url.partition("://")
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" not in netloc:
        return url
    return f"{scheme}{sep}***@{netloc.rsplit('@', 1)[1]}{rest[len(netloc):]}"
