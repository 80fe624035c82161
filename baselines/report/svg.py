"""Charts as inline SVG: a curve chart and a sparkline, no plotting library."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from baselines.report._common import COLOURS
from baselines.report.markup import Markup, join, markup
from llm_envs.formatting import fmt as _fmt


def _ticks(lo: float, hi: float, *, integer: bool = False, count: int = 4) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (a flat range is widened)."""
    if hi - lo <= 1e-12 * max(1.0, abs(lo)):
        pad = 1.0 if integer else (abs(lo) * 0.1 or 1.0)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in steps if m * magnitude >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(round(step)))
    start = math.floor(lo / step + 1e-9) * step
    ticks = [start]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(start + len(ticks) * step)
    return ticks


def _tick_labels(ticks: Sequence[float]) -> list[str]:
    """The shortest labels (3 to 10 significant digits) that tell the ticks apart."""
    for digits in range(3, 11):
        labels = [
            "0" if abs(t) < 1e-12 * max(map(abs, ticks)) else f"{t:.{digits}g}" for t in ticks
        ]
        if len(set(labels)) == len(labels):
            return labels
    return labels


@dataclass(frozen=True)
class Curve:
    """A labelled curve of a chart: its points."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    colour: str = COLOURS[0]
    points_only: bool = False


def _thin(
    xs: Sequence[float], ys: Sequence[float], most: int = 500
) -> tuple[list[float], list[float]]:
    """At most ``most`` points (every k-th, the last kept): long runs stay quick to draw."""
    if len(xs) <= most:
        return list(xs), list(ys)
    step = math.ceil(len(xs) / most)
    keep = [*range(0, len(xs) - 1, step), len(xs) - 1]
    return [xs[i] for i in keep], [ys[i] for i in keep]


def line_chart(curves: Sequence[Curve], *, width: int, height: int, title: str = "") -> Markup:
    """A line chart as inline SVG: y and x (iteration) ticks, a tooltip per point when few."""
    curves = [c for c in curves if c.xs]
    if not curves:
        return Markup("")
    legend = len(curves) > 1
    left, right, bottom = 52, 10, 18
    top = 8 + 16 * bool(title) + 14 * legend
    x_lo, x_hi = min(min(c.xs) for c in curves), max(max(c.xs) for c in curves)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    xt = [t for t in _ticks(x_lo, x_hi, integer=True) if x_lo <= t <= x_hi]
    yt = _ticks(min(min(c.ys) for c in curves), max(max(c.ys) for c in curves))
    pw, ph = width - left - right - 12, height - top - bottom

    def sx(x: float) -> float:  # 6 px inside the axes: a point on the edge stays whole
        return left + 6 + (x - x_lo) / (x_hi - x_lo) * pw

    def sy(y: float) -> float:
        return top + ph - (y - yt[0]) / (yt[-1] - yt[0]) * ph

    out = [
        markup(
            '<svg width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">',
            width,
            height,
            title,
        )
    ]
    if title:
        out.append(markup('<text class="t" x="4" y="12">{}</text>', title))
    x = float(left)
    for curve in curves if legend else ():  # a row under the title
        out.append(
            markup(
                '<rect x="{0:.0f}" y="{1}" width="9" height="9" fill="{2}"/>'
                '<text x="{3:.0f}" y="{4}">{5}</text>',
                x,
                top - 18,
                curve.colour,
                x + 13,
                top - 10,
                curve.label,
            )
        )
        x += 24 + 5.5 * len(curve.label)
    for t, label in zip(yt, _tick_labels(yt), strict=True):
        out.append(
            markup(
                '<line class="g" x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}"/>'
                '<text x="{3}" y="{4:.1f}" text-anchor="end">{5}</text>',
                left,
                width - right,
                sy(t),
                left - 4,
                sy(t) + 3,
                label,
            )
        )
    out.append(
        markup(
            '<line class="a" x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>', left, width - right, top + ph
        )
    )
    for t in xt:
        out.append(
            markup(
                '<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>', sx(t), height - 5, _fmt(t)
            )
        )
    for curve in curves:
        xs, ys = _thin(curve.xs, curve.ys)
        if not curve.points_only and len(xs) > 1:
            points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys, strict=True))
            out.append(
                markup(
                    '<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>',
                    points,
                    curve.colour,
                )
            )
        if curve.points_only or len(xs) <= 40:
            radius = 3 if curve.points_only else 2
            out.extend(
                markup(
                    '<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>{}, {}: {}</title>'
                    "</circle>",
                    sx(x),
                    sy(y),
                    radius,
                    curve.colour,
                    curve.label,
                    _fmt(x),
                    _fmt(y),
                )
                for x, y in zip(xs, ys, strict=True)
            )
    out.append(Markup("</svg>"))
    return join("", out)


def sparkline(
    xs: Sequence[float], ys: Sequence[float], width: int = 120, height: int = 26
) -> Markup:
    """A curve without axes, for a table cell; its tooltip gives the range."""
    if len(xs) < 2:
        return Markup("")
    xs, ys = _thin(xs, ys, 200)
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    spread_x, spread_y = (x1 - x0) or 1.0, (y1 - y0) or 1.0

    def point(x: float, y: float) -> str:
        py = height / 2 if y1 == y0 else 2 + (height - 4) * (1 - (y - y0) / spread_y)
        return f"{2 + (width - 4) * (x - x0) / spread_x:.1f},{py:.1f}"

    points = " ".join(point(x, y) for x, y in zip(xs, ys, strict=True))
    return markup(
        '<svg width="{}" height="{}" role="img"><title>min {}, max {}</title>'
        '<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/></svg>',
        width,
        height,
        _fmt(y0),
        _fmt(y1),
        points,
        COLOURS[0],
    )
