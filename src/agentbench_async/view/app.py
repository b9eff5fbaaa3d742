"""``agentbench view``: the aiohttp application over one or more result files.

Read-only by construction: every route is GET (anything else is answered 405), the files are opened
read-only through ``analytics.load``, and the SQL box runs one SELECT on a connection without file or
network access. The one exception is the SQL page's CSV download: a POST carrying the server's token (which only
its own pages hold, so another site's page cannot make a browser ask for it), from the same origin when the
browser names one, cut at ``csv_max_rows`` rows and ``csv_max_bytes`` bytes. It binds loopback unless told otherwise; then it also refuses requests whose ``Host`` is
not a loopback name (so a web page cannot reach it through DNS rebinding). Pages carry no inline script or
style and a Content-Security-Policy that allows only the viewer's own ``/static`` files, on top of the
escaping of every value (``html.py``).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path

from aiohttp import web

from ..errors import AgentBenchError
from . import pages
from . import queries as q
from .html import CSP, Markup, page
from .source import Source

STATIC = Path(__file__).parent / "static"
DEFAULT_PORT = 8760
LIVE_REFRESH_S = 2.0
PENDING_REFRESH_S = 3.0
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
_HEADERS = {
    "Content-Security-Policy": f"{CSP}; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
SOURCE: web.AppKey[Source] = web.AppKey("source", Source)
TOKEN: web.AppKey[str] = web.AppKey("token", str)  # the CSV download's per-server token
CSV_LIMITS: web.AppKey[tuple[int, int]] = web.AppKey("csv_limits", tuple)  # (rows, bytes) of a CSV download at most
CSV_PATH = "/sql.csv"
LOOPBACK_ONLY: web.AppKey[bool] = web.AppKey("loopback_only", bool)
WARM: web.AppKey[asyncio.Task[None]] = web.AppKey("warm", asyncio.Task)
log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _request_host(request: web.Request) -> str:
    host = request.headers.get("Host", "")
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same_origin(request: web.Request) -> bool:
    """No ``Origin`` (a client that is not a browser), or the one this request is addressed to."""
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.headers.get('Host', '')}"


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    csv = request.path == CSV_PATH
    if request.method not in (("POST",) if csv else ("GET", "HEAD")):
        text = ("the CSV download is a POST from the SQL page's own button (it carries this server's token): open /sql, "
                "run the query, press download CSV\n") if csv else "agentbench view is read-only: only GET requests are answered\n"  # fmt: skip
        resp: web.StreamResponse = web.Response(status=405, text=text, headers={"Allow": "POST" if csv else "GET, HEAD"})
    elif request.app[LOOPBACK_ONLY] and not is_loopback(_request_host(request)):
        resp = web.Response(status=403, text="agentbench view answers only requests addressed to its loopback address\n")
    else:
        try:
            resp = await handler(request)
        except q.ViewError as exc:
            resp = _html(request, "Cannot show this", pages.error_page(str(exc)), status=exc.status)
        except AgentBenchError as exc:
            resp = _html(request, "Cannot read the results", pages.error_page(str(exc)), status=503)
    resp.headers.update(_HEADERS)
    if request.path.startswith("/static/"):
        resp.headers["Cache-Control"] = "no-cache"
    else:
        resp.headers["Cache-Control"] = "no-store"
    return resp


def _html(request: web.Request, title: str, body: Markup, *, active: str = "", status: int = 200, refresh: float | None = None) -> web.Response:
    files = [str(p) for p in request.app[SOURCE].paths]
    return web.Response(text=page(title, body, active=active, files=files, refresh_s=refresh), content_type="text/html", status=status)


def _files(request: web.Request) -> list[str]:
    return [str(p) for p in request.app[SOURCE].paths]


async def overview(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    data = await source.run(lambda res: q.overview(res, source))
    return _html(request, "Overview", pages.overview(data, _files(request)), active="/", refresh=PENDING_REFRESH_S if data.pending else None)


async def failures(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    data = await source.run(lambda res: q.failure_matrix(res, source))
    return _html(request, "Failure classes", pages.failures(data), active="/failures")


async def episodes(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    filters = q.EpisodeFilters.from_query(request.query, source.paths)
    data = await source.run(lambda res: q.episode_page(res, filters, source))
    return _html(request, "Episodes", pages.episodes(data), active="/episodes")


async def episode(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    query = request.query
    data = await source.run(lambda res: q.transcript(res, query.get("id", ""), query.get("run", ""), query.get("file", "")))
    return _html(request, f"Episode {data.episode['episode_id']}", pages.transcript(data, _files(request)), active="/episodes")


async def live(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    data = await source.run(lambda res: q.live(res, source))
    body = pages.live(data, _files(request), datetime.now().strftime("%H:%M:%S"))
    if request.query.get("fragment"):
        return web.Response(text=body, content_type="text/html")
    return _html(request, "Live", body, active="/live", refresh=LIVE_REFRESH_S)


async def compare(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    query = request.query
    data = await source.run(lambda res: q.comparison(res, query, source))
    return _html(request, "Compare", pages.compare(data, allow=query.get("allow") == "1"), active="/compare")


async def sql(request: web.Request) -> web.Response:
    source = request.app[SOURCE]
    text = request.query.get("q", "")

    def work(res: q.Results) -> tuple[q.SqlAnswer | None, str, list[tuple[str, str]]]:
        tables = q.schema(res)
        if not text.strip():
            return None, "", tables
        try:
            return q.run_sql(res, text), "", tables
        except q.ViewError as exc:
            return None, str(exc), tables

    answer, error, tables = await source.run(work)
    status = 200 if not error else 403 if "read-only" in error else 400
    rows, size = request.app[CSV_LIMITS]
    body = pages.sql(text, answer, error, tables, csv=pages.CsvForm(CSV_PATH, request.app[TOKEN], rows, size))
    return _html(request, "SQL", body, active="/sql", status=status)


async def sql_csv(request: web.Request) -> web.Response:
    form = await request.post()
    token = form.get("token")
    if not _same_origin(request) or not isinstance(token, str) or not hmac.compare_digest(token, request.app[TOKEN]):
        return web.Response(status=403, text="the CSV download needs this server's token, which only its own SQL page holds: "
                                             "open /sql and press download CSV there\n")  # fmt: skip
    text = str(form.get("q", ""))
    rows, size = request.app[CSV_LIMITS]
    done = await request.app[SOURCE].run(lambda res: q.csv_export(res, text, rows, size))
    headers = {"Content-Disposition": 'attachment; filename="query.csv"'}
    if done.cut is not None:  # the file holds the first rows only: say so where a script can see it
        headers["X-AgentBench-Cut"] = f"first {done.rows:,} rows: the download stops at {done.cut} (agentbench view --csv-max-rows/--csv-max-mib)"
    return web.Response(body=done.body, content_type="text/csv", charset="utf-8", headers=headers)


async def not_found(request: web.Request) -> web.Response:
    raise q.ViewError(f"no page {request.path!r}: use the links at the top", status=404)


async def _warm(app: web.Application) -> None:
    """Compute the slow analytics (bootstrap intervals, class pivot) once, in the background, at start."""
    source = app[SOURCE]

    async def warm() -> None:
        try:
            await source.run(lambda res: (q.overview(res, source), q.failure_matrix(res, source)))
        except Exception:  # the pages report it when asked; a warm-up failure must not stop the server
            log.debug("warm-up failed", exc_info=True)

    app[WARM] = asyncio.create_task(warm())


def make_app(source: Source, *, loopback_only: bool = True, csv_max_rows: int = q.CSV_ROWS, csv_max_bytes: int = q.CSV_BYTES) -> web.Application:
    app = web.Application(middlewares=[_guard], client_max_size=1 << 20)  # a POST body (the CSV's query) of 1 MiB at most
    app[SOURCE] = source
    app[LOOPBACK_ONLY] = loopback_only
    app[TOKEN] = secrets.token_urlsafe(32)
    app[CSV_LIMITS] = (csv_max_rows, csv_max_bytes)
    app.add_routes([
        web.get("/", overview), web.get("/failures", failures), web.get("/episodes", episodes), web.get("/episode", episode),
        web.get("/live", live), web.get("/compare", compare), web.get("/sql", sql), web.post(CSV_PATH, sql_csv),
        web.static("/static", STATIC), web.route("*", "/{tail:.*}", not_found),
    ])  # fmt: skip
    app.on_startup.append(_warm)
    app.on_cleanup.append(lambda _: _close(source))
    return app


async def _close(source: Source) -> None:
    source.close()


async def serve(paths: Sequence[Path], host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                ready: Callable[[str], None] | None = None, pool: bool = False, csv_max_rows: int = q.CSV_ROWS,
                csv_max_bytes: int = q.CSV_BYTES) -> None:  # fmt: skip
    """Serve the viewer until cancelled; ``ready(url)`` is called once it listens. ``pool`` merges the configurations
    of a model x environment into one row (by default each has its own); ``csv_max_*`` bound the SQL page's download."""
    source = Source(paths, pool=pool)
    await asyncio.get_running_loop().run_in_executor(None, source.check)
    app = make_app(source, loopback_only=is_loopback(host), csv_max_rows=csv_max_rows, csv_max_bytes=csv_max_bytes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise q.ViewError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port") from None
        bound = site._server.sockets[0].getsockname()[1] if port == 0 else port  # type: ignore[union-attr]
        shown = f"[{host}]" if ":" in host else host
        if ready is not None:
            ready(f"http://{shown}:{bound}/")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
