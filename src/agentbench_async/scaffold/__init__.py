"""``agentbench new-env NAME --out DIR``: an installable environment package that runs at once.

The files come from ``template/`` (shipped in the wheel) with the names filled in: a pyproject declaring the
``agentbench_async.environments`` entry point, the environment, its session (a small real protocol), task files,
the mock's oracle and weak policies, tests that pass as written and a README saying what to edit.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import __version__
from ..bounds import excerpt
from ..envs import ENV_NAMES, _REGISTRY, plugins
from ..errors import ConfigError

_TEMPLATE = Path(__file__).resolve().parent / "template"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _files(module: str) -> dict[str, str]:
    """Where each template goes in the new package."""
    return {
        "pyproject.toml.tmpl": "pyproject.toml",
        "README.md.tmpl": "README.md",
        "__init__.py.tmpl": f"src/{module}/__init__.py",
        "session.py.tmpl": f"src/{module}/session.py",
        "tasks.py.tmpl": f"src/{module}/tasks.py",
        "policies.py.tmpl": f"src/{module}/policies.py",
        "dev.json.tmpl": f"src/{module}/tasks/dev.json",
        "test.json.tmpl": f"src/{module}/tasks/test.json",
        "test_env.py.tmpl": f"tests/test_{module}.py",
    }


def check_name(name: str) -> None:
    """A new environment's name: a lowercase identifier no built-in or installed plugin has, else a ConfigError."""
    if not _NAME.fullmatch(name):
        raise ConfigError(f"new-env: {name!r} is not a valid environment name; use lowercase letters, digits and _, starting "
                          "with a letter (e.g. support_desk)")  # fmt: skip
    if name in _REGISTRY or name in ENV_NAMES or name == "all":
        raise ConfigError(f"new-env: {name!r} is a built-in environment's name; choose another")
    if name in plugins():
        raise ConfigError(f"new-env: {name!r} is already installed ({plugins()[name].package}); choose another name")


def new_env(name: str, out: Path) -> list[Path]:
    """Write the package for environment ``name`` into ``out`` (new or empty); the files written."""
    check_name(name)
    try:
        return _write_package(name, out)
    except OSError as exc:  # under /proc or /sys, a name past the system's limit, a read-only or full disk
        raise ConfigError(f"new-env: --out {excerpt(str(out))}: cannot write there ({exc.strerror or exc}); give a new folder "
                          "you can write, with a shorter name if it was too long") from None  # fmt: skip


def _write_package(name: str, out: Path) -> list[Path]:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"new-env: --out {excerpt(str(out))} exists and is not an empty directory; give a new one")
    module = f"agentbench_env_{name}"
    values = {
        "__NAME__": name,
        "__MODULE__": module,
        "__DIST__": f"agentbench-env-{name.replace('_', '-')}",
        "__CLASS__": "".join(part.capitalize() for part in name.split("_") if part) + "Environment",
        "__AB_VERSION__": __version__,
    }
    written = []
    for template, target in _files(module).items():
        text = (_TEMPLATE / template).read_text(encoding="utf-8")
        for key, value in values.items():
            text = text.replace(key, value)
        path = out / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
