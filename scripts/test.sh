#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fresh machine to green tests: OS packages, ./.venv with pysandbox built from source
# (-Werror) and the test tools; the wheels users install (scripts/build-wheels.sh, when
# this machine has every supported Python), which the suite checks on all five; then
# the whole suite in parallel (pytest-xdist) with the default python3; the C-heavy tests
# under ASan and UBSan (scripts/sanitize.sh); and the suite again on the oldest and the
# newest supported Python, each with its wheel installed: what users get.  Each stage
# says how long it took.  Extra arguments go to the suite's pytest runs.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

timed() {
    local name="$1" start=$SECONDS
    shift
    "$@"
    echo "test.sh: $name took $((SECONDS - start)) s"
}

timed "the build from source" env PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
missing=""
for version in 3.9 3.10 3.11 3.12 3.13; do
    bash scripts/find-python.sh "$version" >/dev/null || missing+=" $version"
done
if [ -z "$missing" ]; then
    timed "the wheels" bash scripts/build-wheels.sh "$wheels"
    export PYSANDBOX_WHEELS="$wheels"
else
    echo "skipping the wheels and the suite on 3.9 and 3.13: no Python$missing (pyenv install)"
fi
timed "the suite" .venv/bin/pytest -n auto "$@"
timed "the sanitizers" bash scripts/sanitize.sh
[ -z "$missing" ] || exit 0

for version in 3.9 3.13; do
    python=$(bash scripts/find-python.sh "$version")
    venv=".venv-$version"
    tag="cp${version/./}"
    wheel=$(echo "$wheels"/pysandbox-*-"$tag-$tag"-*.whl)
    # The test tools with the wheel, then the wheel again over whatever an earlier run
    # left.  Not byte-compiled: of the tools' thousands of modules the suite imports few
    # (half of pip's CPU time).
    timed "the venv for $version" bash scripts/make-venv.sh "$python" "$venv"
    timed "the test tools on $version" "$venv/bin/python" -m pip install -q --no-compile "$wheel[test]"
    "$venv/bin/python" -m pip install -q --no-compile --force-reinstall --no-deps "$wheel"
    # The first suite ran the wheels' test on all five, and setup.py's (one per run:
    # the build from source is the same on every Python).
    timed "the suite on $version" "$venv/bin/pytest" -n auto --ignore=tests/repo/test_wheels.py \
        --ignore=tests/repo/test_source_build.py "$@"
done
