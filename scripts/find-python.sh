#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Print the path of a Python VERSION (e.g. 3.9) interpreter that runs: the newest pyenv
# build of it, else python3.X on PATH (a pyenv shim only runs the versions pyenv has
# selected, hence the check).  Exit 1 when there is none.
set -euo pipefail
version="$1"
root="${PYENV_ROOT:-$HOME/.pyenv}"
candidates=()
for dir in $(ls -d "$root/versions/$version".* 2>/dev/null | sort -V -r); do
    candidates+=("$dir/bin/python$version")
done
command -v "python$version" >/dev/null && candidates+=("$(command -v "python$version")")
for python in "${candidates[@]}"; do
    if "$python" -c 'import ensurepip, sys; print(sys.executable)' 2>/dev/null; then
        exit 0
    fi
done
exit 1
