"""HTML building blocks of the viewer: escaping, links, tables and the page layout.

Everything that is not ``Markup`` is escaped when it is put into a page, so model output, task ids, error
messages and SQL results render as text (a reply holding ``<script>`` shows the characters). The pages
carry no inline script or style: the Content-Security-Policy of ``app.py`` only allows ``/static``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode



class Markup(str):
    """A string of HTML that is safe to put into a page as it is (built by this module)."""


def esc(value: Any) -> Markup:
    """``value`` as HTML text (``None`` is empty); ``Markup`` passes unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup("" if value is None else escape(str(value)))


def join(parts: Iterable[Any]) -> Markup:
    return Markup("".join(esc(p) for p in parts))


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path?query`` with the non-empty ``params`` (the filters a link keeps)."""
    kept = {k: v for k, v in (params or {}).items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def link(href: str, text: Any, cls: str = "") -> Markup:
    attr = f' class="{escape(cls)}"' if cls else ""
    return Markup(f'<a href="{escape(href)}"{attr}>{esc(text)}</a>')


def element(name: str, body: Any, cls: str = "", **attrs: Any) -> Markup:
    """``<name class=.. attrs..>body</name>`` (attribute values escaped; ``data_x`` becomes ``data-x``)."""
    pairs = ([("class", cls)] if cls else []) + [(k.replace("_", "-"), v) for k, v in attrs.items() if v is not None]
    text = "".join(f' {k}="{escape(str(v))}"' for k, v in pairs)
    return Markup(f"<{name}{text}>{esc(body)}</{name}>")


def fmt(value: Any, digits: int = 3) -> str:
    """A cell value as text: floats rounded, timestamps to the second, ``None`` as a dash."""
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:,.{digits}f}".rstrip("0").rstrip(".")
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, left: int = 1, cls: str = "", test_id: str | None = None) -> Markup:
    """A table; the first ``left`` columns are left-aligned text, the others right-aligned figures.

    A cell is escaped unless it is ``Markup`` (e.g. a link); numbers are formatted with ``fmt``."""
    head = "".join(f'<th class="{"l" if i < left else "r"}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            text = v if isinstance(v, Markup) else esc(v if isinstance(v, str) else fmt(v))
            cells.append(f'<td class="{"l" if i < left else "r"}">{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    attrs = f' class="{escape(cls)}"' if cls else ""
    if test_id:
        attrs += f' data-table="{escape(test_id)}"'
    return Markup(f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def note(text: Any) -> Markup:
    return element("p", text, cls="note")


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; "
       "base-uri 'none'")  # the pages' Content-Security-Policy (the live app adds frame-ancestors, which a <meta> cannot carry)

NAV: tuple[tuple[str, str], ...] = (
    ("/", "Overview"), ("/failures", "Failures"), ("/episodes", "Episodes"), ("/live", "Live"),
    ("/compare", "Compare"), ("/sql", "SQL"),
)


def page(title: str, body: Markup, *, active: str, files: Sequence[str], refresh_s: float | None = None,
         nav_links: Sequence[tuple[str, str]] = NAV, csp_meta: bool = False) -> str:
    """The whole document: header with the navigation (``nav_links``) and the files shown, then ``body``. ``csp_meta``
    puts the Content-Security-Policy into the page itself (a static export has no server to send it as a header)."""
    on = ' class="on"'
    nav = "".join(f'<a href="{href}"{on if href == active else ""}>{escape(label)}</a>' for href, label in nav_links)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">' if csp_meta else ""
    names = ", ".join(escape(f.rsplit("/", 1)[-1]) for f in files)
    refresh = f' data-refresh="{refresh_s:g}"' if refresh_s else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{meta}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · agentbench view</title>"
        '<link rel="icon" href="/static/favicon.svg"><link rel="stylesheet" href="/static/view.css"><script src="/static/view.js" defer></script></head>'
        f"<body{refresh}><header><span class=\"brand\">agentbench view</span><nav>{nav}</nav>"
        f'<span class="files" title="{escape(", ".join(files))}">{names}</span></header>'
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )
