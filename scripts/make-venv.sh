#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Make the venv DIR of the interpreter PYTHON, with pip, unless DIR has one already.
# Quickly: ensurepip takes 15 s on CI's machine, so where PYTHON has a pip of its own,
# that pip installs pip into a venv made without (2 s, the wheel from pip's cache).
set -euo pipefail
python="$1"
venv="$2"
[ ! -x "$venv/bin/python" ] || exit 0
if "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m venv --without-pip "$venv"
    "$python" -m pip --python "$venv/bin/python" install -q --no-compile pip
else
    "$python" -m venv "$venv"
fi
