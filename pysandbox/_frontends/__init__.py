# SPDX-License-Identifier: MIT
"""Layer 7, the ways in for people: the command line, its options, the demo and ``%%sandbox``.

``pysandbox.pytest_plugin`` is a front end too, kept at the package's top so users can
name it; its ``pytest_*`` modules here (points, reports, the submission) are the only
ones of this package that import pytest, and only the plugin imports them.

Imports: any layer below and this package.
"""
