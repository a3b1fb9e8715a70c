#!/usr/bin/env bash
# Fresh machine to demo: OS packages, ./.venv with pysandbox, then `python -m pysandbox`.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
.venv/bin/python -m pip install -q .
exec .venv/bin/python -m pysandbox "$@"
