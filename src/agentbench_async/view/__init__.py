"""``agentbench view``: a local web app over result files (scores, failure matrix, transcripts, live, compare, SQL).

``serve(paths, host, port)`` runs it; ``make_app(Source(paths))`` builds the aiohttp application (tests).
Modules: ``source`` (files opened per request in worker threads, memoised analytics), ``queries`` (what
each page reads), ``pages`` and ``html`` (rendering, everything escaped), ``app`` (routes and the
read-only, loopback-only guard), ``export`` (the same pages written as a static site: ``view --export DIR``),
``static/`` (the one stylesheet and script, shipped in the wheel).
"""

from __future__ import annotations

from .app import DEFAULT_PORT, make_app, serve
from .source import Source

__all__ = ["DEFAULT_PORT", "Source", "make_app", "serve"]
