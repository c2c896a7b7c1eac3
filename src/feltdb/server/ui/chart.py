"""The overview's chart: completions and failures per minute, as server-rendered SVG.

Pure geometry: a :class:`~feltdb.server.ui.overview.Throughput` in, bars out. The template
draws them; no script is needed. Completions are drawn above the axis and failures below
it, so the two are told apart by position (and each bar's title), not by colour alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from feltdb.server.ui.overview import Throughput

WIDTH: Final = 600
"""The chart's width in SVG units (it scales to the page)."""
HALF: Final = 60
"""The height of each half: completions above the axis, failures below."""
GAP: Final = 1


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: where it stands and what it says when pointed at (``title``)."""

    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """The bars of both halves, the axis' height and the scale's top value."""

    completions: list[Bar]
    failures: list[Bar]
    axis_y: int
    peak: int
    width: int = WIDTH
    height: int = 2 * HALF + 2


def chart_of(throughput: Throughput) -> Chart:
    """The bars of ``throughput``'s minutes, oldest at the left, scaled to its peak."""
    minutes = throughput.minutes
    step = WIDTH / max(1, len(minutes))
    peak = throughput.peak
    completions: list[Bar] = []
    failures: list[Bar] = []
    for index, minute in enumerate(minutes):
        x = index * step
        width = max(1.0, step - GAP)
        when = _clock(minute.start)
        if minute.completions:
            height = HALF * minute.completions / peak
            completions.append(
                Bar(x, HALF - height, width, height, f"{when}: {minute.completions} completed")
            )
        if minute.failures:
            height = HALF * minute.failures / peak
            failures.append(Bar(x, HALF + 2, width, height, f"{when}: {minute.failures} failed"))
    return Chart(completions, failures, HALF + 1, peak)


def _clock(seconds: int) -> str:
    hours, rest = divmod(seconds % 86400, 3600)
    return f"{hours:02d}:{rest // 60:02d} UTC"
