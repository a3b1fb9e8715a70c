#!/usr/bin/env bash
# Fresh machine to green tests: OS packages, ./.venv with pysandbox and the test tools,
# then the whole suite in parallel (pytest-xdist).  Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]"
exec .venv/bin/pytest -n auto "$@"
