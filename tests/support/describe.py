# SPDX-License-Identifier: MIT
"""One account of a ``Result`` for assertion messages, shared by every test."""

from __future__ import annotations

from pysandbox import Result

#: Bytes of each stream's tail shown: enough for a traceback, short enough to read.
TAIL = 1500


def describe(result: Result, **context: object) -> str:
    """What a failing assertion should show of ``result``: the verdict, the exit, the
    usage, the files' sizes and the tails of both streams, then ``context`` (what the
    test saw besides, as ``name=value``)."""
    parts = [
        f"{result.status} rc={result.returncode} signal={result.signal}",
        f"cpu={result.cpu_time:.3f} wall={result.wall_time:.3f} rss={result.max_rss}",
    ]
    if result.files or result.files_truncated:
        sizes = {name: len(data) for name, data in result.files.items()}
        parts.append(f"files={sizes} files_truncated={result.files_truncated}")
    parts.extend(f"{name}={value!r}" for name, value in context.items())
    parts.append(f"stdout={result.stdout[-TAIL:]!r} stderr={result.stderr[-TAIL:]!r}")
    return " ".join(parts)
