"""Reading charts back in tests: what a reader sees on a matplotlib axes, and a PNG file's size."""

import struct
from pathlib import Path

from matplotlib.axes import Axes


def drawn(axes: Axes) -> tuple[list[float], list[str], list[str], list[str]]:
    """Bar heights, value annotations, x tick labels and legend entries of `axes`, in drawing order."""
    heights = [patch.get_height() for patch in axes.patches]
    annotations = [text.get_text() for text in axes.texts]
    ticks = [label.get_text() for label in axes.get_xticklabels()]
    return heights, annotations, ticks, [text.get_text() for text in axes.get_legend().get_texts()]


def png_size(path: Path) -> tuple[int, int]:
    """Width and height in pixels of the PNG at `path` (fails on anything that is not a PNG)."""
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])
