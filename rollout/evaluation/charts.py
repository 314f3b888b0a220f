"""Labelled bar and line charts with matplotlib, rendered headless and reproducible byte for byte.

Why this shape: every report here (selection bands, evaluation domains and success counts, before/after
comparisons, learning curves) is a bar or line chart that must read on its own, so each carries a title,
axis labels, tick labels, a legend and the values written on the bars. Figures are built with the object API
on the Agg canvas (no pyplot, no display, no global backend switch), under matplotlib's default style so a
user's matplotlibrc cannot change the output, and saved without the "Software" text chunk, so the same
inputs give the same PNG bytes (rollout.select's manifest hashes them).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from rollout.records import atomic_write

DPI = 100


@contextmanager
def default_style() -> Iterator[None]:
    """matplotlib's own defaults while a figure is built (whatever the user's matplotlibrc says)."""
    with matplotlib.style.context("default"):
        yield


def new_figure(width_in: float = 8.0, height_in: float = 4.5) -> Figure:
    """A figure on the Agg canvas (headless). Build it inside `default_style()` (or a function decorated
    with `@default_style()`): artists read the style when they are made."""
    figure = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def label_axes(axes: Axes, title: str, xlabel: str, ylabel: str) -> None:
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)


def grouped_bars(axes: Axes, categories: Sequence[str], series: Mapping[str, Sequence[float | None]], *,
                 value_format: str, top: float | None = None) -> None:
    """One group of bars per category, one bar per series (legend), each annotated with its value;
    a None value draws no bar and is annotated "n/a". `top` fixes the y range (e.g. 1 for shares)."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        offsets = [c + (i - (len(series) - 1) / 2) * width for c in range(len(categories))]
        bars = axes.bar(offsets, [0.0 if v is None else v for v in values], width, label=name)
        axes.bar_label(bars, labels=["n/a" if v is None else format(v, value_format) for v in values],
                       padding=2, fontsize=8)
    axes.set_xticks(range(len(categories)), categories, rotation=20 if len(categories) > 4 else 0,
                    ha="right" if len(categories) > 4 else "center")
    if top is not None:
        axes.set_ylim(0, top * 1.1)  # room for the annotations above a full bar
    outside_legend(axes)


def count_bars(axes: Axes, categories: Sequence[str], counts: Sequence[int], kinds: Sequence[str],
               colours: Mapping[str, str] | None = None) -> None:
    """One bar per category annotated with its count, coloured by its kind (one legend entry per kind, in
    first-seen order): e.g. kept and dropped selection bands, or tasks never, sometimes and always solved.
    `colours` fixes some kinds' colours (grey for what was not judged, so it reads as neither good nor bad);
    the other kinds take the colour cycle in order."""
    fixed = colours or {}
    cycle = iter(f"C{n}" for n in range(len(kinds)))
    for kind in dict.fromkeys(kinds):
        where = [i for i, k in enumerate(kinds) if k == kind]
        colour = fixed[kind] if kind in fixed else next(cycle)
        bars = axes.bar(where, [counts[i] for i in where], 0.7, color=colour, label=kind)
        axes.bar_label(bars, fmt="{:d}", padding=2, fontsize=8)
    axes.set_xticks(range(len(categories)), categories)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylim(0, max([1, *counts]) * 1.15)  # room for the annotation above the tallest bar
    outside_legend(axes)


def outside_legend(axes: Axes) -> None:
    """The legend right of the plot, where it cannot hide a bar or its annotation."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG, without the metadata that names the matplotlib version."""
    buffer = io.BytesIO()
    with default_style():  # savefig reads the style too (facecolor, dpi)
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def write_png(path: str | Path, figure: Figure) -> Path:
    """Save atomically (readers see the old plot or the new one)."""
    atomic_write(path, png_bytes(figure))
    return Path(path)
