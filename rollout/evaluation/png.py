"""Bar charts as PNG files with the standard library only (zlib + struct), byte-for-byte reproducible.

Why not matplotlib: it is not a dependency of this project yet. These charts carry no text; the Markdown
report that embeds them lists the bars' labels and values in the same order, left to right. Each bar is
drawn to scale against `top` (the chart's full height), with a light guide line at each quarter.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from rollout.records import atomic_write

WHITE, GUIDE, AXIS = (255, 255, 255), (225, 225, 225), (60, 60, 60)
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189))


def bar_chart_png(values: Sequence[float], top: float, *, colors: Sequence[tuple[int, int, int]] = PALETTE[:1],
                  bar_px: int = 40, gap_px: int = 12, height_px: int = 240) -> bytes:
    """PNG bytes of one bar per value (colors cycle), heights value / top of the plot area."""
    if top <= 0:
        raise ValueError(f"top must be positive, got {top}")
    margin = 10
    width = margin * 2 + max(1, len(values)) * (bar_px + gap_px)
    height = height_px + margin * 2
    rows = [bytearray(bytes(WHITE) * width) for _ in range(height)]

    def fill(x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        for y in range(max(0, y0), min(height, y1)):
            rows[y][x0 * 3:x1 * 3] = bytes(color) * (x1 - x0)

    base = margin + height_px
    for quarter in range(1, 5):
        y = base - height_px * quarter // 4
        fill(margin, y, width - margin, y + 1, GUIDE)
    for i, value in enumerate(values):
        x = margin + gap_px // 2 + i * (bar_px + gap_px)
        bar = round(height_px * min(max(value, 0.0), top) / top)
        fill(x, base - bar, x + bar_px, base, colors[i % len(colors)])
    fill(margin, base, width - margin, base + 2, AXIS)
    raw = b"".join(b"\x00" + bytes(row) for row in rows)  # filter type 0 on every scanline
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def write_bar_chart(path: str | Path, values: Sequence[float], top: float, **style) -> Path:
    atomic_write(path, bar_chart_png(values, top, **style))
    return Path(path)
