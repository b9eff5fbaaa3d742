"""What an environment's code is, as a run records it: part of what a run resumes against.

An edited environment decides episodes differently, so its results are not those of the earlier code: the run stores
this text among the environment's options (``code``), where it enters the fingerprint, and a resume of the same
``--out`` file with other code is refused as a different configuration (``demo`` plays it again and says why).

- a file environment (``--env FILE.py``): ``sha256:<the file's hash>``;
- an installed plugin: ``sha256:<hash of its package's source files> (<distribution> <version>)`` (an editable
  install's edits change the hash, a released version's number changes too);
- a built-in environment: ``behaviour N`` once its ``behaviour_version`` has been raised above 1 for a change of
  results (nothing before, so earlier files resume as they did).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

from . import env_class
from .files import loaded
from .names import _REGISTRY, plugins

_SOURCE_SUFFIXES = (".py", ".json", ".jsonl", ".yaml", ".yml", ".txt", ".toml", ".sql")  # what can decide an episode
_MAX_FILES = 5_000  # a package bigger than this is hashed on its first files' names and contents, then names and sizes


def code_of(name: str) -> str | None:
    """What environment ``name``'s code is (module docstring); None for a built-in at behaviour 1."""
    file_env = loaded(name)
    if file_env is not None:
        return file_env.code
    if name not in _REGISTRY and name in plugins():
        plugin = plugins()[name]
        return f"sha256:{package_hash(plugin.target.partition(':')[0].partition('.')[0])} ({plugin.package})"  # the hash first: labels cut at 40
    version = getattr(env_class(name), "behaviour_version", 1)
    return f"behaviour {version}" if version != 1 else None


@functools.cache
def package_hash(top_module: str) -> str:
    """A hash of the source files of ``top_module``'s package (a single module: its file), 16 hex digits."""
    spec = importlib.util.find_spec(top_module)
    digest = hashlib.sha256()
    if spec is None:
        return "unknown"
    if spec.submodule_search_locations:
        files = sorted(p for root in spec.submodule_search_locations for p in Path(root).rglob("*")
                       if p.suffix in _SOURCE_SUFFIXES and "__pycache__" not in p.parts and p.is_file())  # fmt: skip
        base = [Path(root) for root in spec.submodule_search_locations]
    elif spec.origin:
        files, base = [Path(spec.origin)], [Path(spec.origin).parent]
    else:
        return "unknown"
    for index, path in enumerate(files):
        relative = next((str(path.relative_to(b)) for b in base if path.is_relative_to(b)), path.name)
        digest.update(relative.encode() + b"\0")
        try:
            digest.update(path.read_bytes() if index < _MAX_FILES else str(path.stat().st_size).encode())
        except OSError:
            digest.update(b"unreadable")
        digest.update(b"\0")
    return digest.hexdigest()[:16]
