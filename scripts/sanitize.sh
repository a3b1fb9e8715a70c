#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The C core under AddressSanitizer and UndefinedBehaviorSanitizer: build pysandbox into
# ./.venv-sanitize with PYSANDBOX_SANITIZE=1 and run the tests that drive the C hardest,
# with the sanitizer runtimes preloaded (an extension built with ASan only loads into a
# python whose first library is libasan).  Any report fails the run.  Extra arguments go
# to pytest.  Run after scripts/setup.sh (scripts/test.sh calls it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=.venv-sanitize
bash scripts/make-venv.sh python3 "$venv"
# Built from a copy: setuptools reuses the object files under build/ when the sources
# are older, so a sanitized build there would end up in the next plain install.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r setup.py pyproject.toml README.rst MANIFEST.in src pysandbox "$copy/"
rm -rf "$copy/pysandbox/_init" "$copy"/pysandbox/*.so
PYSANDBOX_STRICT=1 PYSANDBOX_SANITIZE=1 "$venv/bin/python" -m pip install -q --no-cache-dir \
    --force-reinstall --no-deps "$copy"
"$venv/bin/python" -m pip install -q pytest pytest-xdist
runtimes="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
# detect_leaks=0: CPython itself leaks by design at exit; halt on the first report.  The
# C unit tests (tests/core/test_c_units.py) build their own sanitized programs and run them
# with leak detection on.
LD_PRELOAD="$runtimes" \
    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$venv/bin/pytest" -n auto -q -p no:cacheprovider \
    tests/core/test_core.py tests/core/test_invariants.py tests/core/test_launch.py \
    tests/core/test_core_started.py tests/api/test_contract.py tests/api/test_run.py \
    tests/api/test_run_files.py tests/api/test_run_async.py tests/api/test_output_callbacks.py \
    tests/runner/test_warm.py tests/core/test_c_units.py "$@"
