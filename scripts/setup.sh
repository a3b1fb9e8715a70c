# SPDX-License-Identifier: MIT
# Sourced by demo.sh and test.sh: install the OS packages that are missing (apt-get,
# after apt-get update), then create ./.venv.  Works as root (CI, containers) and as a
# user with sudo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v cc >/dev/null || need+=(gcc)
command -v musl-gcc >/dev/null || need+=(musl-tools)
[ -e /usr/include/seccomp.h ] || need+=(libseccomp-dev)
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
    need+=(python3-dev)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
