# SPDX-License-Identifier: MIT
"""The version of pysandbox: its one source (``pyproject.toml`` reads it)."""

__version__ = "0.1.0"
