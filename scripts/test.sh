#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fresh machine to green tests: OS packages, ./.venv with pysandbox and the test tools,
# then the whole suite in parallel (pytest-xdist) with the default python3, and again
# with the oldest and the newest supported Python when this machine has them (pyenv's,
# or python3.X on PATH; a missing one is skipped with the reason); between them, the
# C-heavy tests under ASan and UBSan (scripts/sanitize.sh).  Extra arguments go to the
# suite's pytest runs.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]"
.venv/bin/pytest -n auto "$@"
bash scripts/sanitize.sh

for version in 3.9 3.13; do
    python=$(bash scripts/find-python.sh "$version") || {
        echo "skipping the suite on Python $version: not installed (pyenv install $version)"
        continue
    }
    echo "the suite on Python $version ($python)"
    venv=".venv-$version"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    PYSANDBOX_STRICT=1 "$venv/bin/python" -m pip install -q ".[test]"
    "$venv/bin/pytest" -n auto "$@"
done
