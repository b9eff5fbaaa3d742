"""The Freebase schema files that decide what the tools show.

The format is AgentBench's ``ontology/`` folder:

* ``vocab.json``: ``{"relations": [...], "attributes": [...], "classes": [...]}``. ``get_relations`` keeps only
  predicates listed in ``relations`` (entity-valued), ``get_attributes`` only those in ``attributes``
  (literal-valued). ``type.object.*`` and ``common.topic.*`` are in neither, so names and types stay hidden.
* ``fb_roles``: lines ``<domain type> <relation> <range type>``; the range is the type a ``get_neighbors``
  variable is an "instance of" (and what ``intersection`` compares).
* ``reverse_properties`` (optional here): ``<relation>\\t<reverse relation>``; not used by the tools, but the
  built-in graph generator uses it to store both directions as Freebase does.

The official files live under ``<data-dir>/knowledgegraph/ontology/``; the built-in graph ships its own
small files in the same format under ``environments/kg/ontology/``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from ...environment import TaskFileError, read_json, read_text


@dataclass(frozen=True)
class Ontology:
    relations: frozenset[str]
    attributes: frozenset[str]
    ranges: dict[str, str] = field(default_factory=dict)  # relation -> range type (from fb_roles)
    domains: dict[str, str] = field(default_factory=dict)  # relation -> domain type
    reverse: dict[str, str] = field(default_factory=dict)  # relation -> reverse relation

    def range_of(self, relation: str) -> str | None:
        return self.ranges.get(relation)


def load_ontology(folder: Path) -> Ontology:
    """Read ``vocab.json``, ``fb_roles`` and (if present) ``reverse_properties`` from ``folder``.

    Cached per folder and file modification times (the official files take ~0.1 s to read).
    """
    stamps = tuple(p.stat().st_mtime_ns if p.is_file() else 0 for p in (folder / "vocab.json", folder / "fb_roles", folder / "reverse_properties"))
    return _load_cached(folder.resolve(), stamps)


@functools.lru_cache(maxsize=8)
def _load_cached(folder: Path, stamps: tuple[int, ...]) -> Ontology:
    vocab_path = folder / "vocab.json"
    roles_path = folder / "fb_roles"
    for path in (vocab_path, roles_path):
        if not path.is_file():
            raise TaskFileError(f"{path}: missing; the kg ontology folder needs vocab.json and fb_roles (AgentBench's ontology/ layout)")
    vocab = read_json(vocab_path, missing=f"{vocab_path}: missing")
    try:
        relations = frozenset(str(r) for r in vocab["relations"])
        attributes = frozenset(str(a) for a in vocab["attributes"])
    except (KeyError, TypeError) as exc:
        raise TaskFileError(f"{vocab_path}: not a vocab file ({exc}); it must be a JSON object with 'relations' and 'attributes' lists") from None
    ranges: dict[str, str] = {}
    domains: dict[str, str] = {}
    for line in read_text(roles_path, missing=f"{roles_path}: missing").splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        # Upstream's file has one malformed line with extra fields; like upstream, the third field is
        # the range and a line without one gives the relation no range (get_neighbors then fails).
        domains[parts[1]] = parts[0]
        if len(parts) >= 3:
            ranges[parts[1]] = parts[2]
        else:
            ranges.pop(parts[1], None)
    reverse: dict[str, str] = {}
    reverse_path = folder / "reverse_properties"
    if reverse_path.is_file():
        for line in read_text(reverse_path, missing=f"{reverse_path}: missing").splitlines():
            parts = line.split("\t")
            if len(parts) == 2 and parts[0] and parts[1]:
                reverse[parts[0].strip()] = parts[1].strip()
                reverse.setdefault(parts[1].strip(), parts[0].strip())
    return Ontology(relations=relations, attributes=attributes, ranges=ranges, domains=domains, reverse=reverse)
