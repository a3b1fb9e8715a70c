"""A hostile submission: a fork bomb.  The sandbox's process limit caps it, its CPU limit
ends it, and every test of this program scores 0."""

import contextlib
import os

while True:
    with contextlib.suppress(OSError):
        os.fork()
