# SPDX-License-Identifier: MIT
"""Where the documents are and their code examples: the README's quick starts and the
documentation site's pages (``docs/``), which the tests run so they never drift."""

from __future__ import annotations

import re
from pathlib import Path

#: The checkout: the folder above ``tests``.
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.rst"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The site's pages, in the order of its tables of contents in ``index.rst``."""
    index = (DOCS / "index.rst").read_text()
    trees = re.findall(r"^\.\. toctree::\n((?: {3}.*\n|\n)+)", index, re.MULTILINE)
    names = [
        line.strip() for tree in trees for line in tree.splitlines() if line.strip()[:1].isalpha()
    ]
    return [DOCS / "index.rst", *(DOCS / f"{name}.rst" for name in names)]


def code_blocks(language: str, document: Path) -> list[str]:
    """The bodies of a document's ``.. code-block:: LANGUAGE`` blocks, in order, still
    indented as written."""
    pattern = rf"\.\. code-block:: {re.escape(language)}\n\n((?:(?: {{3,}}.*)?\n)+)"
    return re.findall(pattern, document.read_text())
