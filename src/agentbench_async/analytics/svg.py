"""Small inline-SVG charts for the HTML report (no plotting library, no JavaScript, opens offline).

Every chart is an ``<svg class="plot" data-plot="<kind>">`` element; labels are XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE: tuple[str, ...] = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e")
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def _svg(kind: str, width: float, height: float, body: list[str], title: str) -> str:
    return (
        f'<svg class="plot" data-plot="{kind}" xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" '
        f'height="{_fmt(height)}" viewBox="0 0 {_fmt(width)} {_fmt(height)}" role="img" aria-label="{escape(title)}" {FONT}>'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


_CHAR_W = 7.2  # px per character at font-size 12, on the wide side (system-ui averages ~6.5 for these labels)


def _label_width(labels: Sequence[str], least: float = 170.0) -> float:
    """Room for the longest row label (right-aligned before the bars), so no label is cut at the chart's edge."""
    return max(least, max((len(label) for label in labels), default=0) * _CHAR_W + 12)


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is >= value (an axis top)."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def stacked_bars(
    rows: Sequence[tuple[str, Mapping[str, float]]], categories: Sequence[str], colors: Mapping[str, str], title: str
) -> str:
    """Horizontal 100% stacked bars: one bar per row label, segments per category (shares 0..1)."""
    label_w, bar_w, bar_h, gap, top = _label_width([label for label, _ in rows]), 520.0, 20.0, 8.0, 28.0
    legend_rows = (len(categories) + 2) // 3
    height = top + len(rows) * (bar_h + gap) + 24 + legend_rows * 18
    body = [f'<text x="0" y="16" font-weight="bold">{escape(title)}</text>']
    for i, (label, shares) in enumerate(rows):
        y = top + i * (bar_h + gap)
        body.append(f'<text x="{label_w - 6}" y="{_fmt(y + 14)}" text-anchor="end">{escape(label)}</text>')
        x = label_w
        for cat in categories:
            share = float(shares.get(cat, 0.0) or 0.0)
            if share <= 0:
                continue
            w = share * bar_w
            body.append(
                f'<rect class="segment" data-category="{escape(cat)}" x="{_fmt(x)}" y="{_fmt(y)}" width="{_fmt(w)}" '
                f'height="{_fmt(bar_h)}" fill="{colors[cat]}"><title>{escape(label)}: {escape(cat)} '
                f"{100 * share:.1f}%</title></rect>"
            )
            if w > 30:
                body.append(f'<text x="{_fmt(x + w / 2)}" y="{_fmt(y + 14)}" text-anchor="middle" fill="#fff" font-size="10">'
                            f"{100 * share:.0f}%</text>")
            x += w
    ly = top + len(rows) * (bar_h + gap) + 12
    for j, cat in enumerate(categories):
        lx = label_w + (j % 3) * 180
        yy = ly + (j // 3) * 18
        body.append(f'<rect x="{_fmt(lx)}" y="{_fmt(yy)}" width="12" height="12" fill="{colors[cat]}"/>')
        body.append(f'<text x="{_fmt(lx + 16)}" y="{_fmt(yy + 10)}">{escape(cat)}</text>')
    return _svg("failure-classes", label_w + bar_w + 20, height, body, title)


def interval_bars(rows: Sequence[tuple[str, float, float | None, float | None]], title: str, unit: str = "%") -> str:
    """Horizontal bars (values 0..100) with interval whiskers [low, high]."""
    label_w, bar_w, bar_h, gap, top = _label_width([row[0] for row in rows]), 480.0, 18.0, 8.0, 28.0
    height = top + len(rows) * (bar_h + gap) + 26
    body = [f'<text x="0" y="16" font-weight="bold">{escape(title)}</text>']
    axis_y = top + len(rows) * (bar_h + gap)
    for tick in range(0, 101, 20):
        tx = label_w + tick / 100 * bar_w
        body.append(f'<line x1="{_fmt(tx)}" y1="{top - 4}" x2="{_fmt(tx)}" y2="{_fmt(axis_y)}" stroke="#ddd"/>')
        body.append(f'<text x="{_fmt(tx)}" y="{_fmt(axis_y + 14)}" text-anchor="middle" fill="#555">{tick}{unit}</text>')
    for i, (label, value, low, high) in enumerate(rows):
        y = top + i * (bar_h + gap)
        body.append(f'<text x="{label_w - 6}" y="{_fmt(y + 13)}" text-anchor="end">{escape(label)}</text>')
        w = max(0.0, min(100.0, value)) / 100 * bar_w
        body.append(f'<rect class="bar" x="{label_w}" y="{_fmt(y)}" width="{_fmt(w)}" height="{bar_h}" fill="{PALETTE[0]}">'
                    f"<title>{escape(label)}: {value:.1f}{unit}</title></rect>")
        if low is not None and high is not None:
            x1, x2 = label_w + low / 100 * bar_w, label_w + high / 100 * bar_w
            cy = y + bar_h / 2
            body.append(f'<g class="interval" stroke="#222" stroke-width="1.5"><line x1="{_fmt(x1)}" y1="{_fmt(cy)}" '
                        f'x2="{_fmt(x2)}" y2="{_fmt(cy)}"/><line x1="{_fmt(x1)}" y1="{_fmt(y + 3)}" x2="{_fmt(x1)}" '
                        f'y2="{_fmt(y + bar_h - 3)}"/><line x1="{_fmt(x2)}" y1="{_fmt(y + 3)}" x2="{_fmt(x2)}" '
                        f'y2="{_fmt(y + bar_h - 3)}"/></g>')
        if value > 85:
            body.append(f'<text x="{_fmt(label_w + w - 4)}" y="{_fmt(y + 13)}" text-anchor="end" font-size="10" fill="#fff">{value:.1f}</text>')
        else:
            body.append(f'<text x="{_fmt(label_w + w + 4)}" y="{_fmt(y - 1)}" font-size="10" fill="#333">{value:.1f}</text>')
    return _svg("scores", label_w + bar_w + 30, height, body, title)


def histogram(counts: Mapping[int, int], title: str) -> str:
    """Vertical bars: how many episodes (y) used each number of turns (x)."""
    width, height, left, bottom, top = 260.0, 150.0, 30.0, 24.0, 22.0
    body = [f'<text x="0" y="14" font-weight="bold" font-size="11">{escape(title)}</text>']
    if not counts:
        return _svg("turns-histogram", width, height, body, title)
    lo, hi = min(counts), max(counts)
    span = hi - lo + 1
    ymax = _nice_max(max(counts.values()))
    plot_w, plot_h = width - left - 6, height - bottom - top
    bw = plot_w / span
    body.append(f'<line x1="{left}" y1="{_fmt(top + plot_h)}" x2="{_fmt(width - 6)}" y2="{_fmt(top + plot_h)}" stroke="#999"/>')
    body.append(f'<text x="{left - 4}" y="{_fmt(top + 8)}" text-anchor="end" font-size="10" fill="#555">{ymax:g}</text>')
    for k in range(lo, hi + 1):
        c = counts.get(k, 0)
        h = c / ymax * plot_h
        x = left + (k - lo) * bw
        if c:
            body.append(f'<rect class="bar" x="{_fmt(x + 1)}" y="{_fmt(top + plot_h - h)}" width="{_fmt(max(bw - 2, 1))}" '
                        f'height="{_fmt(h)}" fill="{PALETTE[3]}"><title>{k} turns: {c} episodes</title></rect>')
        if span <= 15 or (k - lo) % max(1, span // 10) == 0:
            body.append(f'<text x="{_fmt(x + bw / 2)}" y="{_fmt(top + plot_h + 14)}" text-anchor="middle" font-size="10">{k}</text>')
    return _svg("turns-histogram", width, height, body, title)


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], title: str, x_label: str, y_label: str) -> str:
    """Lines (with dots) of y over x, one per series, with a legend."""
    width, height, left, right, top, bottom = 700.0, 260.0, 56.0, 150.0, 26.0, 34.0
    body = [f'<text x="0" y="16" font-weight="bold">{escape(title)}</text>']
    points = [p for pts in series.values() for p in pts]
    if not points:
        return _svg("latency", width, height, body, title)
    xmax = max(x for x, _ in points) or 1.0
    ymax = _nice_max(max(y for _, y in points))
    plot_w, plot_h = width - left - right, height - top - bottom
    body.append(f'<line x1="{left}" y1="{_fmt(top + plot_h)}" x2="{_fmt(left + plot_w)}" y2="{_fmt(top + plot_h)}" stroke="#999"/>')
    body.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{_fmt(top + plot_h)}" stroke="#999"/>')
    for frac in (0, 0.5, 1):
        yv = ymax * frac
        yy = top + plot_h - frac * plot_h
        body.append(f'<text x="{left - 4}" y="{_fmt(yy + 4)}" text-anchor="end" font-size="10">{yv:g}</text>')
        xv = xmax * frac
        xx = left + frac * plot_w
        body.append(f'<text x="{_fmt(xx)}" y="{_fmt(top + plot_h + 14)}" text-anchor="middle" font-size="10">{xv:.0f}</text>')
    body.append(f'<text x="{_fmt(left + plot_w / 2)}" y="{_fmt(height - 4)}" text-anchor="middle" fill="#555">{escape(x_label)}</text>')
    body.append(f'<text x="12" y="{_fmt(top + plot_h / 2)}" text-anchor="middle" fill="#555" '
                f'transform="rotate(-90 12 {_fmt(top + plot_h / 2)})">{escape(y_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        coords = [(left + x / xmax * plot_w, top + plot_h - min(y, ymax) / ymax * plot_h) for x, y in sorted(pts)]
        if len(coords) > 1:
            path = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in coords)
            body.append(f'<polyline class="series" data-series="{escape(name)}" points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for x, y in coords if len(coords) <= 200 else []:
            body.append(f'<circle cx="{_fmt(x)}" cy="{_fmt(y)}" r="2" fill="{color}"/>')
        if len(coords) == 1:
            body.append(f'<circle class="series" data-series="{escape(name)}" cx="{_fmt(coords[0][0])}" cy="{_fmt(coords[0][1])}" r="3" fill="{color}"/>')
        ly = top + 4 + i * 16
        body.append(f'<rect x="{_fmt(left + plot_w + 12)}" y="{_fmt(ly)}" width="12" height="3" fill="{color}"/>')
        body.append(f'<text x="{_fmt(left + plot_w + 28)}" y="{_fmt(ly + 5)}">{escape(name)}</text>')
    return _svg("latency", width, height, body, title)
