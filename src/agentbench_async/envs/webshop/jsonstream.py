"""Read the elements of a top-level JSON array or the members of a top-level JSON object one at a time.

WebShop's product file is one JSON array of ~1.18 M products (several GB); ``json.load`` would hold the
whole parsed document at once. These readers keep one decoded element (plus a read buffer) in memory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import TaskFileError

_CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("r", encoding="utf-8")
        self.buf = ""
        self.pos = 0
        self._eof = False

    def close(self) -> None:
        self._file.close()

    def _more(self) -> bool:
        if self._eof:
            return False
        try:
            chunk = self._file.read(_CHUNK)
        except UnicodeDecodeError:
            raise TaskFileError(f"{self.path}: not UTF-8 text; save it as UTF-8") from None
        if not chunk:
            self._eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        char = self.peek()
        if not char or char not in chars:
            raise TaskFileError(f"{self.path}: not valid JSON: expected {what} at character {self.pos} of a read block")
        self.pos += 1
        return char

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # incomplete value at the end of the buffer: read more and retry; a real error stays one
                if self._more():
                    continue
                raise TaskFileError(f"{self.path}: not valid JSON: {exc.msg}") from None
            if end == len(self.buf) and not self._eof and self._more():
                continue  # a number may continue in the next block
            self.pos = end
            return value


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[_Reader]:
    try:
        reader = _Reader(path)
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        yield reader
    except UnicodeDecodeError:
        raise TaskFileError(f"{path}: not UTF-8 text") from None
    finally:
        reader.close()


def iter_array(path: Path) -> Iterator[Any]:
    """Elements of the JSON array in ``path``, in order."""
    with _reading(path) as reader:
        reader.expect("[", "a JSON array")
        if reader.peek() == "]":
            return
        while True:
            yield reader.value()
            if reader.expect(",]", "',' or ']'") == "]":
                return


def iter_object(path: Path) -> Iterator[tuple[str, Any]]:
    """(key, value) members of the JSON object in ``path``, in order."""
    with _reading(path) as reader:
        reader.expect("{", "a JSON object")
        if reader.peek() == "}":
            return
        while True:
            if reader.peek() != '"':
                raise TaskFileError(f"{path}: not valid JSON: expected a member name")
            key = reader.value()
            reader.expect(":", "':'")
            yield key, reader.value()
            if reader.expect(",}", "',' or '}'") == "}":
                return
