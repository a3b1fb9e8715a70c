# SPDX-License-Identifier: MIT
"""Layer 5, the calls: one call's arguments checked, its ``Plan`` built, its ``Facts`` read.

``eval_in_sandbox`` (the reference contract), ``run`` and ``run_python``, their async
forms (``aio``) and ``selftest``.

Imports: the layers below and this package.
"""
