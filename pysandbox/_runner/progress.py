# SPDX-License-Identifier: MIT
"""The progress display of ``Runner.map``: a tqdm bar (``tqdm.auto``: a widget in
notebooks, text elsewhere) with the count of each verdict after it.

tqdm is optional (``pip install pysandbox[progress]``): it is imported only when a bar
is asked for.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from .outcome import Outcome

__all__ = ["ProgressBar", "Tally", "open_bar"]


class ProgressBar(Protocol):
    """What ``Runner.map`` needs of a bar; a ``tqdm.tqdm`` has it."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> Any: ...


def check_progress(progress: object) -> None:
    """``TypeError`` naming ``progress`` unless it is a bool or a bar (``update`` and
    ``set_postfix``)."""
    if isinstance(progress, bool):
        return
    if not (
        callable(getattr(progress, "update", None))
        and callable(getattr(progress, "set_postfix", None))
    ):
        raise TypeError(
            "progress must be True, False or a tqdm-like bar (with update and set_postfix), "
            f"not {type(progress).__name__}"
        )


def open_bar(total: int | None) -> Any:
    """A new ``tqdm.auto.tqdm`` bar counting jobs; ``ImportError`` saying how to install
    tqdm when it is missing."""
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as exc:
        raise ImportError(
            "Runner.map(progress=True) needs tqdm: pip install pysandbox[progress]"
        ) from exc
    return tqdm(total=total, unit="job", desc="pysandbox")


class Tally:
    """The count of each verdict so far, shown after the bar (``OK=95, ERROR=1``)."""

    def __init__(self, bar: ProgressBar) -> None:
        self._bar = bar
        self._counts: Counter[str] = Counter()

    def add(self, outcome: Outcome) -> None:
        """Count ``outcome`` and move the bar one job on."""
        self._counts[outcome.verdict] += 1
        self._bar.set_postfix(dict(sorted(self._counts.items())), refresh=False)
        self._bar.update(1)
