# SPDX-License-Identifier: MIT
"""``Copier``: the template sandbox of one kind of warm sandbox, and copies of it
(``copies.py`` says what a template and its copies are)."""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Iterator

from .._model.errors import SandboxError
from .copies import ID_SPAN, AsCopy, AsTemplate, copies_user_namespace
from .launcher import Launched, start
from .plan import Plan

__all__ = ["Copier"]


class Copier:
    """The template sandbox of one kind (a warm plan with ``copies``) and its control
    socket; ``copy`` starts a copy of it.  Thread-safe.  The copies are in the
    template's pid namespace, so ``close``, which ends the template, ends every copy
    still running too: ``busy`` says whether one is."""

    def __init__(self, plan: Plan) -> None:
        import socket  # only where templates are copied

        host, template = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._host = host
        self._lock = threading.Lock()
        self._ids: Iterator[int] | None = None
        self._copies: weakref.WeakSet[Launched] = weakref.WeakSet()
        userns = -1
        try:
            if os.geteuid() == 0:
                userns, first = copies_user_namespace()
                self._ids = itertools.cycle(range(first + 1, first + ID_SPAN))
            self._template = start(plan, AsTemplate(template.fileno(), userns))
        except BaseException:
            host.close()
            raise
        finally:
            template.close()
            if userns >= 0:
                os.close(userns)

    def ready_within(self, seconds: float) -> bytes:
        """What the template said, waiting up to ``seconds`` for its first word: ``R``
        once its set-up is done, ``X`` and the traceback when it failed."""
        return self._template.said(seconds)

    def exited(self) -> bool:
        """The template ended (its set-up failed, or it was killed)."""
        return self._template.exited()

    def copy(self, plan: Plan) -> Launched:
        """Start a copy of the template for ``plan`` (its kind's warm plan): a
        ``launcher.Launched`` that waits for its call.  Raises ``SandboxError`` when
        the client cannot be started."""
        # Under the lock: ``close`` waits, so the socket's number is never another's.
        with self._lock:
            if self._host.fileno() < 0:
                raise SandboxError("the template sandbox was closed")
            identity = None if self._ids is None else (next(self._ids),) * 2
            copy = start(plan, AsCopy(self._host.fileno(), identity))
            self._copies.add(copy)
        return copy

    def busy(self) -> bool:
        """A copy of it still runs (or waits for a call)."""
        with self._lock:
            copies = list(self._copies)
        return any(not copy.exited() for copy in copies)

    def close(self) -> None:
        """End the template: its control socket closes (its server returns) and the
        sandbox is killed and reaped.  Idempotent."""
        with self._lock:
            self._host.close()
        self._template.close()
