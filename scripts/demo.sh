#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fresh machine to demo: OS packages, ./.venv with pysandbox, then `python -m pysandbox`.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
.venv/bin/python -m pip install -q .
# -I: from the repository root, python -m would import the uncompiled source package.
exec .venv/bin/python -I -m pysandbox "$@"
