"""Bounds on what the engine reads from outside: config files (size, nesting depth), HTTP bodies (read
incrementally up to a cap), and the shape of ports and URLs the user gives. A value past a bound is one line
naming the input and the fix (``ConfigError``), or a typed error the caller turns into its own status."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from .errors import ConfigError

if TYPE_CHECKING:  # aiohttp and yaml are imported where used: the os environment runs without them (Debian's python3)
    import aiohttp

MIB = 1 << 20
MAX_CONFIG_BYTES = 4 * MIB  # a run's config file (its task files are read on their own)
MAX_CONFIG_DEPTH = 64  # nested mappings/lists of a config file (a real one nests fewer than 10)
# values (mappings, lists, scalars) and characters of text of a config file, an alias counted as what it stands for (a
# real config holds a few hundred values; the text bound is 4x the file's)
MAX_CONFIG_NODES = 100_000
MAX_CONFIG_TEXT = 16 * MIB
MAX_TASK_FILE_BYTES = 64 * MIB  # a task file of the user's own (--tasks ENV=PATH)
MAX_DATA_FILE_BYTES = 1 << 30  # any other file of tasks or prompts the environments read (official data included)
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


def read_at_most(path: Path, limit: int) -> bytearray:
    """The bytes of ``path``, read a chunk at a time up to ``limit + 1`` (so a caller tells "more than ``limit``" from
    "exactly"; ``/dev/zero`` stops there, and a bound of 1 GiB costs no 1 GiB buffer for a small file). OSError as raised."""
    data = bytearray()
    with path.open("rb") as f:
        while len(data) <= limit:
            chunk = f.read(min(MIB, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    return data


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


def load_yaml(text: str, path: Path | str, what: str = "config file") -> Any:
    """``text`` (a config file's, read by ``read_config_text``) parsed as YAML with PyYAML's safe loader, after its shape
    is checked against bounds that count what it expands to (``check_yaml_shape``)."""
    import yaml

    check_yaml_shape(text, path, what)
    return yaml.load(text, Loader=_safe_loader())  # noqa: S506 - the safe loader (libyaml's when built with it)


def _safe_loader() -> type:
    """PyYAML's safe loader, libyaml's C one when PyYAML has it (the same documents, ~10x faster on a large file)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_yaml_shape(text: str, path: Path | str, what: str = "config file") -> None:
    """Refuse YAML (or JSON) whose values, as the program would see them, pass a bound, before anything is built from it:
    nesting deeper than ``MAX_CONFIG_DEPTH``, more than ``MAX_CONFIG_NODES`` values or ``MAX_CONFIG_TEXT`` characters
    of text. An alias (``*name``) counts as all it stands for, so a few hundred bytes of aliases of aliases (a "billion
    laughs") are refused at once instead of growing without end where the settings are walked or copied. PyYAML's event
    parser is not recursive and holds one event at a time: the check itself is bounded by the text's size."""
    import yaml

    # an open mapping/list: [values in it (itself included), characters, levels (itself included)]; anchors: the same of
    # each anchored value, counted where an alias names it
    stack: list[list[int]] = [[0, 0, 0]]
    anchors: dict[str, tuple[int, int, int]] = {}
    nodes = chars = 0
    # PyYAML's own parser (libyaml's scans a flow collection whole before its first event: 100k levels fail in there)
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            if isinstance(event, yaml.ScalarEvent):
                size = (1, len(event.value), 0)
                if event.anchor:
                    anchors[event.anchor] = size
            elif event.anchor in anchors:
                size = anchors[event.anchor]
            else:
                continue  # an undefined alias: the loader says so
            nodes, chars = nodes + size[0], chars + size[1]
            top = stack[-1]
            top[0], top[1], top[2] = top[0] + size[0], top[1] + size[1], max(top[2], size[2] + 1)
            if size[2] + len(stack) - 1 > MAX_CONFIG_DEPTH:
                _shape_error(path, event, f"nests deeper than {MAX_CONFIG_DEPTH} mappings/lists (aliases expanded)", what)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            nodes += 1
            stack.append([1, 0, 1, event.anchor])  # type: ignore[list-item]
            if len(stack) - 1 > MAX_CONFIG_DEPTH:
                raise ConfigError(f"{path}: line {event.start_mark.line + 1} nests deeper than {MAX_CONFIG_DEPTH} mappings/lists; "
                                  f"a {what} needs a few levels, flatten it")  # fmt: skip
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            done = stack.pop()
            size = (done[0], done[1], done[2])
            if done[3]:
                anchors[done[3]] = size  # type: ignore[index]
            top = stack[-1]
            top[0], top[1], top[2] = top[0] + size[0], top[1] + size[1], max(top[2], size[2] + 1)
        else:
            continue
        if nodes > MAX_CONFIG_NODES:
            _shape_error(path, event, f"holds more than {MAX_CONFIG_NODES:,} values (aliases counted as what they stand for)", what)
        if chars > MAX_CONFIG_TEXT:
            _shape_error(path, event, f"holds more than {mib(MAX_CONFIG_TEXT)} of text (aliases counted as what they stand for)", what)


def _shape_error(path: Path | str, event: Any, problem: str, what: str) -> NoReturn:
    raise ConfigError(f"{path}: line {event.start_mark.line + 1} {problem}; a {what} needs far less: write the values out "
                      "(an alias of an alias repeats everything it names)")  # fmt: skip


ERROR_LINE_CHARS = 900  # the most an error line echoes (with "error: ", under 1 KB of ASCII)


def shown(value: object, limit: int = 100) -> str:
    """``value`` as an error message echoes it: its repr, at most ``limit`` characters (``excerpt``)."""
    return excerpt(repr(value), limit)


def excerpt(text: str, limit: int = 80) -> str:
    """``text`` as an error message may echo it: at most ``limit`` characters, the middle cut out (`` … ``) so the start
    and the end stay (a message names the input first and the fix last)."""
    if len(text) <= limit:
        return text
    tail = limit // 3
    return f"{text[: limit - tail - 3]} … {text[-tail:]}"


def check_port(port: int, flag: str) -> None:
    """A TCP port a command listens on: 0 (any free one) to 65535."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{flag} {port}: not a TCP port; give 1-65535 (0 picks a free one)")


def url_problem(url: str) -> str | None:
    """Why ``url``'s host or port does not parse (``http://[::1``, port 99999), or None."""
    info = url_userinfo(url)
    if info is not None and "#" in info:  # a URL parser ends the address at '#': the host would be the user's name
        return "has a '#' in its user or password, where a URL parser reads the end of the address (write it as %23)"
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


def url_userinfo(url: str) -> str | None:
    """The ``user:password`` of ``url``, or None. Read as a person wrote it: the authority runs to the first ``/`` or
    ``?`` after ``://``, and the credentials to its last ``@``, so a ``#`` or ``@`` in a password (which a strict parser
    would take for the fragment) stays part of it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    authority = re.split(r"[/?]", rest, maxsplit=1)[0]
    if "@" not in authority:
        return None
    return authority.rsplit("@", 1)[0]


def redact_url(url: str) -> str:
    """``http://user:secret@host:3128`` -> ``http://***@host:3128`` (credentials are never stored or printed; a ``#`` in
    the password is part of it: ``url_userinfo``)."""
    info = url_userinfo(url)
    if info is None:
        return url
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}***@{rest[len(info) + 1:]}"
