# SPDX-License-Identifier: MIT
"""Real matplotlib figures, drawn by Agg, for the rich-output tests: the PNG, JPEG and
SVG a notebook would show.  Skips without matplotlib (or Pillow, for JPEG)."""

from __future__ import annotations

import io
import warnings

import pytest


def figure_bytes(format: str, fonttype: str = "path") -> bytes:
    """A small figure with a line, markers, an image, a legend and a title with ``<``,
    ``&`` and a non-ASCII letter, saved as ``format``; ``fonttype`` is matplotlib's
    ``svg.fonttype`` (``"path"``: text drawn as paths, ``"none"``: as text).

    Older matplotlib (3.9's, on Python 3.9) calls pyparsing names that newer pyparsing
    deprecates, and the suite turns warnings into errors: they are ignored here, around
    matplotlib alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        matplotlib = pytest.importorskip("matplotlib")
        if format == "jpeg":
            pytest.importorskip("PIL")
        matplotlib.use("Agg")
        from matplotlib.figure import Figure

        with matplotlib.rc_context({"svg.fonttype": fonttype}):
            figure = Figure(figsize=(3, 2))
            axes = figure.subplots()
            axes.plot([1, 2, 3], [3, 1, 2], "o-", label="x < y & z")
            axes.imshow([[0.0, 1.0], [1.0, 0.0]], extent=(1, 3, 1, 3))
            axes.legend()
            axes.set_title("Tïtle")
            out = io.BytesIO()
            figure.savefig(out, format=format)
    return out.getvalue()
