# SPDX-License-Identifier: MIT
"""The metadata PyPI would show: what the built sdist and wheel say (their PKG-INFO and
METADATA) is what pyproject.toml means, every classifier is a real one, and twine
accepts both files."""

from __future__ import annotations

import email.message
import email.parser
import subprocess
import sys
import tarfile
import zipfile

import pytest
from support.sdist import ROOT, built_sdist, built_wheel

import pysandbox

if sys.version_info >= (3, 11):
    import tomllib
else:  # build, of the test extra, needs tomli below 3.11
    import tomli as tomllib

pytestmark = pytest.mark.no_bwrap

#: The Pythons the package supports and tests, each with its classifier.
SUPPORTED = ("3.9", "3.10", "3.11", "3.12", "3.13")
#: The planned addresses (no public host yet), as pyproject.toml's [project.urls] has them.
URLS = {
    "Documentation": "https://pysandbox.readthedocs.io/",
    "Source": "https://github.com/pysandbox/pysandbox",
    "Issues": "https://github.com/pysandbox/pysandbox/issues",
    "Changelog": "https://github.com/pysandbox/pysandbox/blob/main/CHANGELOG.rst",
}
FRAMEWORKS = ("Framework :: IPython", "Framework :: Jupyter", "Framework :: Pytest")


def _classifiers() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["project"]["classifiers"])


def test_every_classifier_is_a_trove_classifier() -> None:
    """PyPI refuses an upload with a classifier it does not know."""
    from trove_classifiers import classifiers

    unknown = [name for name in _classifiers() if name not in classifiers]
    assert not unknown, f"not trove classifiers: {unknown}"


def _metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def _sdist_metadata() -> email.message.Message:
    with tarfile.open(built_sdist()) as tar:
        (member,) = (
            m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        )
        extracted = tar.extractfile(member)
        assert extracted is not None
        return _metadata(extracted.read().decode())


def _wheel_metadata() -> email.message.Message:
    with zipfile.ZipFile(built_wheel()) as wheel:
        (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return _metadata(wheel.read(name).decode())


@pytest.mark.slow
@pytest.mark.parametrize("built", ["sdist", "wheel"])
def test_built_metadata_has_the_urls_classifiers_and_version(built: str) -> None:
    metadata = _sdist_metadata() if built == "sdist" else _wheel_metadata()
    assert metadata["Name"] == "pysandbox"
    assert metadata["Version"] == pysandbox.__version__
    assert metadata["Requires-Python"] == f">={SUPPORTED[0]}"
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL", []))
    assert urls == URLS
    classifiers = metadata.get_all("Classifier", [])
    assert classifiers == _classifiers()
    for version in SUPPORTED:
        assert f"Programming Language :: Python :: {version}" in classifiers, version
    assert set(FRAMEWORKS) <= set(classifiers)


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="the docs extra has twine on 3.11+")
def test_twine_accepts_the_sdist_and_the_wheel() -> None:
    """``twine check --strict``: the metadata is complete and the README renders."""
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(built_sdist()),
            str(built_wheel()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
