"""Reading environments' options (``--env-option ENV.KEY=VALUE`` arrives as text): one clear line when wrong."""

from __future__ import annotations

from ..errors import ConfigError


def int_option(env: str, key: str, value: object, *, minimum: int = 1, meaning: str = "") -> int:
    """``value`` as an integer of at least ``minimum`` (1: positive, 0: non-negative), else a ConfigError naming
    ``env``'s option ``key``, the value given and, when said, what the number means."""
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        number = minimum - 1
    if number < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ConfigError(f"{env}: option {key}={value!r} must be {kind}" + (f" ({meaning})" if meaning else ""))
    return number


def bool_option(env: str, key: str, value: object) -> bool:
    """``value`` as a boolean (``true``/``false`` in any case, or a YAML boolean), else a ConfigError naming
    ``env``'s option ``key`` and the value given."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{env}: option {key}={value!r} must be true or false")
