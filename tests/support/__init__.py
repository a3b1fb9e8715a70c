# SPDX-License-Identifier: MIT
"""What tests share: the one home of test helpers (``from support.timing import slow``).

``tests/`` is on ``sys.path`` (``pythonpath`` in ``pyproject.toml``); no test imports
another test module or ``conftest``.  ``timing`` holds the suite's timing policy,
``processes`` finds a test's processes on the host, ``callers`` runs the installed
package as root or as a non-root caller, ``cli``, ``batch`` and ``runner`` drive those
front ends, ``warm`` waits for warm sandboxes, ``inner_pytest`` runs a pytest inside a
test, ``mountinfo_samples`` holds real mountinfo texts and ``figures`` real matplotlib
figures.
"""
