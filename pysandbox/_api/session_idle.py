# SPDX-License-Identifier: MIT
"""``IdleWatch``: ends a session that has had no call for its idle timeout.

One daemon thread per session, asleep on a condition until the session has been idle
that long, so a call costs two uncontended lock round trips and never starts or stops
a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["IdleWatch"]


class IdleWatch:
    """Calls ``expire()`` once no call has run for ``timeout`` seconds; ``expire``
    returns True when it ended the session, False when a call began meanwhile (the
    watch then goes on).  ``stop`` ends the watch; safe from any thread, the watch's own
    included."""

    def __init__(self, timeout: float, expire: Callable[[], bool]) -> None:
        self._timeout = timeout
        self._expire = expire
        self._condition = threading.Condition()
        self._busy = False
        self._last = time.monotonic()
        self._stopped = False
        thread = threading.Thread(target=self._watch, name="pysandbox-session-idle", daemon=True)
        thread.start()

    def begin(self) -> None:
        """A call starts: the session is not idle until ``end``."""
        with self._condition:
            self._busy = True

    def end(self) -> None:
        """The call ended: the idle time counts from now."""
        with self._condition:
            self._busy = False
            self._last = time.monotonic()

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify()

    def _watch(self) -> None:
        while self._idle_long_enough():
            if self._expire():
                return

    def _idle_long_enough(self) -> bool:
        """Wait until the session has been idle for the timeout (True) or the watch is
        stopped (False).  A busy session is looked at again a timeout later."""
        with self._condition:
            while not self._stopped:
                left = self._last + self._timeout - time.monotonic()
                if not self._busy and left <= 0:
                    return True
                self._condition.wait(self._timeout if self._busy else left)
            return False
