# SPDX-License-Identifier: MIT
"""``Check`` and ``SelftestReport``: what ``selftest()`` found, one protection at a time."""

from __future__ import annotations

import dataclasses

from .display import Pretty, pretty, selftest_html, selftest_text

__all__ = ["Check", "SelftestReport"]


@dataclasses.dataclass(frozen=True)
class Check:
    """One protection: whether it held, what was seen, and the fix when it did not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclasses.dataclass(frozen=True)
class SelftestReport:
    """Every check of one ``selftest()``; true when all of them held."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """Whether every check held (``pysandbox selftest --json``'s ``"ok"``)."""
        return all(check.ok for check in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = []
        for check in self.checks:
            mark = "yes" if check.ok else "NO "
            lines.append(f"[{mark}] {check.name}: {check.detail}")
            if not check.ok and check.fix:
                lines.append(f"       fix: {check.fix}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Pretty, cycle: bool) -> None:
        """IPython's text form: a summary line, then the checks (``display``)."""
        pretty(printer, selftest_text(self), cycle, "SelftestReport")

    def _repr_html_(self) -> str:
        """Jupyter's HTML form: a summary, then a table of the checks (``display``)."""
        return selftest_html(self)
