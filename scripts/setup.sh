# SPDX-License-Identifier: MIT
# Sourced by demo.sh and test.sh: install the OS packages that are missing (apt-get,
# after apt-get update), then create ./.venv.  Works as root (CI, containers) and as a
# user with sudo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v cc >/dev/null || need+=(gcc)
[ -e /usr/include/seccomp.h ] || need+=(libseccomp-dev)
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
    need+=(python3-dev)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
# Wanted, not needed: musl builds the programs every sandbox starts, 0.3 ms faster to
# start than glibc's (setup.py falls back to cc without it; an offline host goes on).
command -v musl-gcc >/dev/null || need+=(musl-tools)
if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    apt=($sudo env DEBIAN_FRONTEND=noninteractive apt-get)
    if ! { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq "${need[@]}" >/dev/null; }; then
        [ "${need[*]}" = musl-tools ] || exit 1
        echo "setup.sh: musl-tools could not be installed: the init is built with cc" >&2
    fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
