"""``agentbench view FILE... --export DIR``: the viewer as a static site (HTML pages and the viewer's own stylesheet).

The pages are the live app's pages, rendered by the same ``pages`` functions (so the same escaping), each with the
app's Content-Security-Policy in a ``<meta>`` (no inline script or style; only the site's own ``static/`` files),
and the app's links (``/episodes?model=..``, ``/episode?id=..``) rewritten to the exported files as relative paths,
so the folder opens from ``file://`` and from any static host. What a static site cannot answer (live, compare, SQL,
free filtering) is left out of its navigation.

Layout: ``index.html`` (overview), ``failures.html`` (failure matrix), ``lists/<n>/<page>.html`` (every episode list
the overview and the matrix link to, and the list of all episodes, ``PAGE_SIZE`` rows a page) and
``episodes/<shard>/<n>.html`` (every stored transcript, ``SHARD`` a folder). The first page is small whatever the
run's size: its size grows with the models and environments, not with the episodes.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from ..analytics.loading import Results, load
from ..analytics.run_settings import episode_differences
from ..wording import counted
from . import pages
from . import queries as q
from .app import STATIC
from .html import Markup, page
from .source import Source

T = TypeVar("T")
SHARD = 1000  # transcripts per folder
CHUNK = 2000  # episodes read from the file at a time while writing transcripts
NAV = (("/", "Overview"), ("/failures", "Failures"), ("/episodes", "Episodes"))
_LIST_KEYS = ("file", "model", "env", "config", "status")
_REF = re.compile(r'\b(href|src|action)="(/[^"]*)"')


class ExportError(q.ViewError):
    """The export folder cannot be written (not empty, not a folder, no permission)."""


@dataclass
class ExportSummary:
    folder: Path
    episodes: int  # transcripts written
    lists: int  # episode lists
    list_pages: int
    bytes: int
    seconds: float
    first_page_bytes: int  # index.html

    def text(self) -> str:
        """What the command prints: what was written, its size and time, and the address to open."""
        return (f"exported {counted(self.episodes, 'transcript')} and {counted(self.list_pages, 'page')} of "
                f"{counted(self.lists, 'episode list')} to {self.folder} ({size_text(self.bytes)}, {self.seconds:.1f} s); "
                f"open {open_hint(self.folder)}")


class _Now(Source):
    """A Source whose background analytics (bootstrap intervals) are computed when asked: an export waits for them."""

    def memo_ready(self, res: Results, name: str, compute: Callable[[Results], T]) -> T | None:
        return self.memo(res, name, compute)


def _list_key(params: dict[str, str]) -> tuple[str, ...]:
    return tuple(params.get(k, "") for k in _LIST_KEYS)


class _Site:
    """Where each of the live app's URLs is in the export (``target``) and the writing of one page (``write``)."""

    def __init__(self, folder: Path, files: list[str]) -> None:
        self.folder = folder
        self.files = files
        self.lists: dict[tuple[str, ...], int] = {}  # list key -> its folder number
        self.episodes: dict[tuple[str, str, str], str] = {}  # (episode id, run id, file number or '') -> path
        self.bytes = 0

    def target(self, ref: str) -> str | None:
        parts = urlsplit(ref)
        query = dict(parse_qsl(parts.query))
        if parts.path == "/":
            return "index.html"
        if parts.path == "/failures":
            return "failures.html"
        if parts.path.startswith("/static/"):
            return "static/" + parts.path.removeprefix("/static/")
        if parts.path == "/episodes" and set(query) <= {*_LIST_KEYS, "page"}:
            number = self.lists.get(_list_key(query))
            return None if number is None else f"lists/{number}/{query.get('page', '1')}.html"
        if parts.path == "/episode":
            return self.episodes.get((query.get("id", ""), query.get("run", ""), query.get("file", "")))
        return None

    def _relink(self, text: str, depth: int) -> str:
        up = "../" * depth

        def swap(m: re.Match[str]) -> str:
            where = self.target(html.unescape(m.group(2)))
            if where is None:  # a page the export has not (live, compare, SQL, another filter): no link
                return f'data-not-exported="{m.group(2)}"'
            return f'{m.group(1)}="{html.escape(up + where)}"'

        return _REF.sub(swap, text)

    def write(self, rel: str, title: str, body: Markup, active: str) -> None:
        depth = rel.count("/")
        text = self._relink(page(title, body, active=active, files=self.files, nav_links=NAV, csp_meta=True), depth)
        path = self.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        self.bytes += len(data)


def _prepare(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"--export {folder}: that is a file; give a folder (new or empty)")
    if folder.is_dir() and any(folder.iterdir()):
        raise ExportError(f"--export {folder}: the folder is not empty; give a new or empty folder (nothing is overwritten)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(STATIC, folder / "static")
    except OSError as exc:
        raise ExportError(f"--export {folder}: cannot write there ({exc.strerror or exc})") from None


def export(paths: Sequence[Path], folder: Path, *, pool: bool = False, progress: Callable[[int, int], None] | None = None) -> ExportSummary:
    """Write the static site of ``paths`` into ``folder`` (new or empty); ``progress(done, total)`` is called as the
    transcripts are written (a chunk at a time)."""
    t0 = time.perf_counter()
    source = _Now(paths, workers=1, pool=pool)
    source.check()
    _prepare(folder)
    try:
        with load(source.paths, pool=pool) as res:
            site = _Site(folder, [str(p) for p in res.paths])
            overview = pages.overview(q.overview(res, source), site.files)
            matrix = pages.failures(q.failure_matrix(res, source))
            wanted = ["/episodes", *(html.unescape(m.group(2)) for m in _REF.finditer(overview + matrix))]
            for ref in wanted:
                parts = urlsplit(ref)
                if parts.path == "/episodes":
                    site.lists.setdefault(_list_key(dict(parse_qsl(parts.query))), len(site.lists) + 1)
            keys = _episode_keys(res, site)
            choices = q.episode_page(res, q.EpisodeFilters(), source)  # models, envs, statuses, configurations: one set
            list_pages = sum(_write_list(res, choices, site, key, number) for key, number in site.lists.items())
            site.write("index.html", "Overview", overview, "/")
            site.write("failures.html", "Failure classes", matrix, "/failures")
            written = _write_transcripts(res, site, keys, progress)
    finally:
        source.close()
    static = sum(f.stat().st_size for f in (folder / "static").iterdir())
    return ExportSummary(folder, written, len(site.lists), list_pages, site.bytes + static, time.perf_counter() - t0,
                         (folder / "index.html").stat().st_size)


def _episode_keys(res: Results, site: _Site) -> list[tuple[str, str, str]]:
    """Every stored attempt (file, run, episode id) in transcript order, each given its page; the latest attempt of an
    id is also what a link without a run (``/episode?id=..``) opens."""
    rows = res.sql("SELECT source_file, run_id, episode_id FROM episodes ORDER BY episode_id, finished_at DESC NULLS LAST, "
                   "source_file, run_id")
    keys = list(rows.iter_rows())
    for n, (file, run, episode) in enumerate(keys):
        rel = f"episodes/{n // SHARD}/{n}.html"
        no = str(site.files.index(file) + 1) if file in site.files else ""
        for key in ((episode, run, no), (episode, run, ""), (episode, "", no), (episode, "", "")):
            site.episodes.setdefault(key, rel)
    return keys


def _write_list(res: Results, choices: q.EpisodePage, site: _Site, key: tuple[str, ...], number: int) -> int:
    """Every page of one episode list (the live app's list with these filters); returns the pages written."""
    filters = q.EpisodeFilters.from_query(dict(zip(_LIST_KEYS, key)), res.paths)
    rows = q.episode_rows(res, filters, limit=None).drop("total")
    total = rows.height
    count = max(1, -(-total // q.PAGE_SIZE))
    for n in range(1, count + 1):
        data = replace(choices, filters=replace(filters, page=n), rows=rows.slice((n - 1) * q.PAGE_SIZE, q.PAGE_SIZE), total=total)
        site.write(f"lists/{number}/{n}.html", "Episodes", pages.episodes(data, form=False), "/episodes")
    return count


def _chunks(keys: list[tuple[str, str, str]]) -> Iterator[list[tuple[str, str, str]]]:
    for i in range(0, len(keys), CHUNK):
        yield keys[i:i + CHUNK]


def _grouped(frame: Any, columns: tuple[str, ...] = ("source_file", "run_id", "episode_id")) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in frame.iter_rows(named=True):
        out.setdefault(tuple(r[c] for c in columns), []).append(r)
    return out


def _write_transcripts(res: Results, site: _Site, keys: list[tuple[str, str, str]],
                       progress: Callable[[int, int], None] | None) -> int:
    """Every stored attempt's transcript page, read ``CHUNK`` episodes at a time (by episode id range)."""
    differs: dict[tuple[str, str], list[str]] = {}
    n = 0
    for chunk in _chunks(keys):
        low, high = chunk[0][2], chunk[-1][2]
        span = [low, high]
        episodes = _grouped(res.sql("SELECT e.*, o.outcome_note FROM episodes AS e LEFT JOIN episode_outcomes AS o "
                                    "USING (run_id, episode_id, source_file) WHERE e.episode_id BETWEEN ? AND ? "
                                    "ORDER BY e.episode_id, e.finished_at DESC NULLS LAST", span), ("episode_id",))
        turns = _grouped(res.sql("SELECT * FROM transcript_turns WHERE episode_id BETWEEN ? AND ? ORDER BY seq", span))
        calls = _grouped(res.sql("SELECT * FROM model_calls WHERE episode_id BETWEEN ? AND ? ORDER BY turn, started_at, attempt", span))
        for file, run, episode in chunk:
            attempts = episodes[(episode,)]
            ep = next(a for a in attempts if (a["source_file"], a["run_id"]) == (file, run))
            key = (file, run, episode)
            others = [a for a in attempts if a is not ep]
            if (run, ep["env"]) not in differs:
                differs[(run, ep["env"])] = episode_differences(res, run, ep["env"])
            data = q.Transcript(ep, turns.get(key, []), calls.get(key, []), others, differs=differs[(run, ep["env"])])
            site.write(f"episodes/{n // SHARD}/{n}.html", f"Episode {episode}", pages.transcript(data, site.files), "/episodes")
            n += 1
        if progress is not None:
            progress(n, len(keys))
    return n


def size_text(count: int) -> str:
    """``12.3 MB``: an export's size for the command's last line."""
    return f"{count / 1e6:,.1f} MB" if count >= 1e5 else f"{count / 1e3:,.1f} kB"


def open_hint(folder: Path) -> str:
    """The ``file://`` address of the export's first page."""
    return (folder.resolve() / "index.html").as_uri() if os.sep == "/" else str(folder / "index.html")
