"""Text as an RGB image: how board games without pictures get a ``render_mode="rgb_array"`` frame
(for ``evaluate --video``)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # (Pillow: the `analysis` extra)
    from PIL import ImageFont

__all__ = ["render_text"]

_SCALE = 3
_MARGIN = 1


@functools.lru_cache(maxsize=1)
def _glyphs() -> tuple[ImageFont.FreeTypeFont | ImageFont.ImageFont, int, int]:
    """Pillow's built-in font and the cell (width, height) every character is drawn in."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError as e:  # the `analysis` extra
        from lz_tune.extras import missing_extra

        raise missing_extra("rendering a board game (evaluate --video)", "analysis", e) from e

    font = ImageFont.load_default()
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    boxes = [draw.textbbox((0, 0), chr(c), font=font) for c in range(33, 127)]
    return font, int(max(b[2] for b in boxes)) + 1, int(max(b[3] for b in boxes)) + 2  # (whole pixels)


def render_text(text: str, *, columns: int = 0, rows: int = 0, scale: int = _SCALE) -> np.ndarray:
    """uint8 ``[H, W, 3]``: ``text`` in black on white, one character per fixed-size cell (a
    monospace grid, so boards line up whatever the font), enlarged ``scale`` times (nearest
    neighbour). The grid has ``max(columns, longest line)`` columns and ``max(rows, lines)`` rows:
    pass the same ``columns`` / ``rows`` for every frame of a video to give all frames one size."""
    from PIL import Image, ImageDraw

    lines = text.split("\n")
    font, cell_w, cell_h = _glyphs()
    ncols = max(columns, max(len(line) for line in lines), 1)
    nrows = max(rows, len(lines))
    image = Image.new("RGB", (ncols * cell_w + 2 * _MARGIN, nrows * cell_h + 2 * _MARGIN), "white")
    draw = ImageDraw.Draw(image)
    for r, line in enumerate(lines):
        for c, ch in enumerate(line):
            if not ch.isspace():
                draw.text((_MARGIN + c * cell_w, _MARGIN + r * cell_h), ch, fill="black", font=font)
    image = image.resize((image.width * scale, image.height * scale), Image.Resampling.NEAREST)
    return np.asarray(image, dtype=np.uint8)
