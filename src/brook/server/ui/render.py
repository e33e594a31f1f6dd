"""How the dashboard's pages are made: the Jinja2 templates and the filters they use
to show numbers, sizes, durations, times and sparklines to people."""

from __future__ import annotations

import time

import jinja2

from brook import settings


def environment() -> jinja2.Environment:
    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("brook.server.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    templates.filters.update(
        {
            "count": count,
            "size": size,
            "duration": duration,
            "time_ms": time_ms,
            "setting": settings.shown,
        }
    )
    templates.globals["sparkline"] = sparkline
    return templates


def now_ms() -> int:
    return int(time.time() * 1000)


def count(n: int | float | None) -> str:
    return "\u2013" if n is None else f"{n:,.0f}"


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def duration(seconds: float) -> str:
    seconds = int(seconds)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def time_ms(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def sparkline(points: list[float], width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of `points` (nothing fetched; allowed by the page's CSP)."""
    if len(points) < 2:
        return ""
    top = max(points) or 1.0
    step = width / (len(points) - 1)
    coords = " ".join(
        f"{i * step:.1f},{height - 2 - (p / top) * (height - 4):.1f}" for i, p in enumerate(points)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="appends per second over the last minute">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{coords}"/></svg>'
    )
