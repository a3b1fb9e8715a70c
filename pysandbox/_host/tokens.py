# SPDX-License-Identifier: MIT
"""Unpredictable names and numbers, from the kernel's random source.

``secrets`` would do, but it imports ``hmac``, ``hashlib`` (and with it OpenSSL) and
``random``: a few milliseconds of every ``pysandbox run``, for three calls that need
only ``os.urandom``.
"""

from __future__ import annotations

import os

__all__ = ["randbelow", "token_hex"]


def token_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as ``2 * nbytes`` lower-case hex digits."""
    return os.urandom(nbytes).hex()


def randbelow(bound: int) -> int:
    """A uniformly random integer in ``[0, bound)``; ``bound`` is at least 1 and below
    ``2**64``.

    Draws 64 random bits and rejects the draws at or above the largest multiple of
    ``bound`` that fits, so every value is equally likely (no modulo bias)."""
    if not 1 <= bound < 2**64:
        raise ValueError(f"bound must be in [1, 2**64), got {bound}")
    limit = 2**64 - 2**64 % bound
    while True:
        draw = int.from_bytes(os.urandom(8), "little")
        if draw < limit:
            return draw % bound
