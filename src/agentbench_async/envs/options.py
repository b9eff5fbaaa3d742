"""Reading environments' options (``--env-option ENV.KEY=VALUE`` arrives as text): one clear line when wrong.

An environment declares the options it accepts as ``Environment.option_specs``, a mapping of name to ``Option``
(what kind of value, its bounds or choices, what it means). The run checks every option of every environment
against these declarations when its config is read, before anything starts: an unknown name is refused with
the list of valid ones, a bad value with one line naming the option, the value and what is valid
(``check_options``). The readers below are what the declarations use; environments call them too when they
read a value at run time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..bounds import redact_url, shown, url_problem
from ..errors import ConfigError

# Options every environment accepts, whatever its option_specs: a task file of the user's own (own_tasks.py)
TASKS_FILE = "tasks_file"  # the environment option --tasks ENV=PATH, tasks: {ENV: PATH} and tasks_file all set
TASKS_SHA256 = "tasks_sha256"  # set by the run: the file's sha256 when the config was read
RESERVED_OPTIONS = (TASKS_FILE, TASKS_SHA256)


def int_option(env: str, key: str, value: object, *, minimum: int = 1, maximum: int | None = None, meaning: str = "") -> int:
    """``value`` as an integer of at least ``minimum`` (1: positive, 0: non-negative) and at most ``maximum``, else a
    ConfigError naming ``env``'s option ``key``, the value given and, when said, what the number means."""
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        number = minimum - 1
    if isinstance(value, float) and not value.is_integer():
        number = minimum - 1  # 2.5 is not 2
    if isinstance(value, bool) or number < minimum or (maximum is not None and number > maximum):
        kind = "a positive integer" if minimum == 1 else "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        kind += f" up to {maximum}" if maximum is not None else ""
        raise ConfigError(f"{env}: option {key}={shown(value)} must be {kind}" + (f" ({meaning})" if meaning else ""))
    return number


def number_option(env: str, key: str, value: object, *, minimum: float = 0.0, above: bool = True, meaning: str = "") -> float:
    """``value`` as a finite number above ``minimum`` (or at least it, when not ``above``), else a ConfigError."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < minimum or (above and number == minimum):
        kind = f"a number {'>' if above else '>='} {minimum:g}"
        raise ConfigError(f"{env}: option {key}={shown(value)} must be {kind}" + (f" ({meaning})" if meaning else ""))
    return number


def choice_option(env: str, key: str, value: object, choices: tuple[str, ...], *, meaning: str = "") -> str:
    """``value`` as one of ``choices``, else a ConfigError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{env}: option {key}={shown(value)} must be one of {', '.join(choices)}" + (f" ({meaning})" if meaning else ""))
    return value


def range_option(env: str, key: str, value: object, *, meaning: str = "") -> tuple[int, int]:
    """``value`` as ``START:END`` (integers, 0 <= START < END), else a ConfigError."""
    start, sep, end = str(value).partition(":")
    try:
        low, high = int(start), int(end)
    except ValueError:
        low, high = -1, -1
    if not sep or low < 0 or high <= low:
        raise ConfigError(f"{env}: option {key}={shown(value)} must be START:END with 0 <= START < END" + (f" ({meaning})" if meaning else ""))
    return low, high


def text_option(env: str, key: str, value: object, *, meaning: str = "", schemes: tuple[str, ...] = (), many: bool = False) -> Any:
    """``value`` as a non-empty string (a path, a name; with ``schemes``, a URL of one of them; with ``many``, also
    a list of such strings), else a ConfigError."""
    items = value if many and isinstance(value, list) else [value]
    ok = bool(items) and all(isinstance(v, str) and v.strip() for v in items)
    if ok and schemes:
        ok = all(str(v).startswith(tuple(f"{s}://" for s in schemes)) for v in items)
    if ok and schemes:
        problem = next((p for p in map(url_problem, items) if p), None)
        if problem is not None:
            raise ConfigError(f"{env}: option {key}={shown(redact_url(str(value)))} {problem}; write it as {schemes[0]}://HOST[:PORT]/... "
                              "(an IPv6 host in brackets)" + (f" ({meaning})" if meaning else ""))  # fmt: skip
    if not ok:
        kind = f"a URL starting with {' or '.join(f'{s}://' for s in schemes)}" if schemes else "a non-empty string" + (" or a list of them" if many else "")
        raise ConfigError(f"{env}: option {key}={shown(value)} must be {kind}" + (f" ({meaning})" if meaning else ""))
    return value


def bool_option(env: str, key: str, value: object) -> bool:
    """``value`` as a boolean (``true``/``false`` in any case, or a YAML boolean), else a ConfigError naming
    ``env``'s option ``key`` and the value given."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{env}: option {key}={shown(value)} must be true or false")


OptionKind = Literal["int", "number", "bool", "choice", "range", "text", "url", "texts"]


@dataclass(frozen=True)
class Option:
    """One option an environment accepts: the kind of value, its bounds or choices, and what it means.

    ``int`` (``minimum``/``maximum``), ``number`` (finite, above ``minimum``; at least it when ``above`` is false),
    ``bool`` (true/false), ``choice`` (one of ``choices``), ``range`` (``START:END``), ``text`` (a non-empty string: a
    path, a name), ``texts`` (one or a list of them), ``url`` (a URL of one of ``schemes``)."""

    kind: OptionKind
    meaning: str = ""
    minimum: float = 1
    maximum: int | None = None
    above: bool = True
    choices: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ("http", "https")

    def read(self, env: str, key: str, value: object) -> Any:
        """``value`` checked and converted (text from ``--env-option`` to the option's type), else a ConfigError."""
        if self.kind == "int":
            return int_option(env, key, value, minimum=int(self.minimum), maximum=self.maximum, meaning=self.meaning)
        if self.kind == "number":
            return number_option(env, key, value, minimum=self.minimum, above=self.above, meaning=self.meaning)
        if self.kind == "bool":
            return bool_option(env, key, value)
        if self.kind == "choice":
            return choice_option(env, key, value, self.choices, meaning=self.meaning)
        if self.kind == "range":
            return range_option(env, key, value, meaning=self.meaning)
        return text_option(env, key, value, meaning=self.meaning, schemes=self.schemes if self.kind == "url" else (),
                           many=self.kind == "texts")  # fmt: skip


def check_options(env: str, specs: Mapping[str, Option], options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``env`` read with its declaration; an unknown name is a ConfigError listing the valid ones."""
    unknown = sorted(set(options) - set(specs))
    if unknown:
        valid = ", ".join(sorted(specs)) or "none"
        raise ConfigError(f"{env}: unknown option {shown(unknown[0])} (valid: {valid})")
    return {key: specs[key].read(env, key, value) for key, value in options.items()}
