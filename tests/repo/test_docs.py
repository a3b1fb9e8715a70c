# SPDX-License-Identifier: MIT
"""The documentation site builds with warnings as errors, documents every public name,
and its Python examples run against the installed package, in real sandboxes."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.docs import DOCS, code_blocks, pages

import pysandbox

#: Sphinx 9 and furo need Python 3.11+: the docs extra installs them only there.
needs_sphinx = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="Sphinx 9 needs Python 3.11+ (the default Python builds)"
)
#: The pages whose examples run, each in a namespace of its own, in order.
WITH_EXAMPLES = [page for page in pages() if code_blocks("python", page)]


@needs_sphinx
def test_site_builds_without_warnings_and_documents_every_public_name(tmp_path: Path) -> None:
    """``sphinx-build -W`` from a scratch folder, so autodoc imports the installed
    package (with its compiled core), not the checkout."""
    sphinx = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    built = subprocess.run(
        [*sphinx, str(DOCS), str(tmp_path / "html")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    api = (tmp_path / "html" / "api.html").read_text()
    documented = set(re.findall(r'id="pysandbox\.(\w+)"', api))
    assert set(pysandbox.__all__) <= documented, sorted(set(pysandbox.__all__) - documented)


def test_every_page_is_in_the_table_of_contents() -> None:
    assert sorted(pages()) == sorted(DOCS.glob("*.rst"))


def test_the_guides_have_examples() -> None:
    names = {page.stem for page in WITH_EXAMPLES}
    assert {"services", "graders"} <= names, names


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=lambda page: page.stem)
def test_page_examples_run_in_order(page: Path) -> None:
    """Each example may use names that an earlier one on its page imported, as a reader
    would; a page's examples share nothing with another page's."""
    namespace: dict[str, object] = {}
    for block in code_blocks("python", page):
        exec(compile(textwrap.dedent(block), str(page), "exec"), namespace)
