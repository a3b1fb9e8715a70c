# SPDX-License-Identifier: MIT
"""Sphinx's settings for the documentation site (``make docs`` builds it).

autodoc imports the *installed* package: the compiled ``_sandbox`` extension exists only
there, so build from a folder other than the checkout's root (``make docs`` does), after
``pip install .``.  The version is the package's own, ``pysandbox._version``.
"""

from __future__ import annotations

from pysandbox._version import __version__

project = "pysandbox"
author = "The pysandbox authors"
copyright = "The pysandbox authors, MIT licence"
release = __version__
version = __version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosectionlabel"]
#: A section is referred to as ``page:Title``: titles repeat from page to page.
autosectionlabel_prefix_document = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"pysandbox {__version__}"
