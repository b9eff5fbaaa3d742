"""Reading the environments' JSON task and prompt files: the content, or one line naming the file and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import TaskFileError


def read_json(path: Path, *, missing: str, where: str | None = None) -> Any:
    """The parsed content of ``path``.

    ``missing`` is the whole message when the file does not exist (say where it should come from);
    ``where`` names the file in the other messages (default: the path itself).
    """
    where = where or str(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskFileError(missing) from None
    except OSError as exc:
        raise TaskFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise TaskFileError(f"{where}: not UTF-8 text") from None
