#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite and the selftest on a real cgroup v2 + systemd host: a Debian 12
# guest of the VM lab (lab/, see lab/README.rst), as root in a system service
# with the unit lines of docs/deployment.rst, then as root in a cgroup namespace (a container's view),
# and as a non-root user in a delegated scope (systemd-run --user --scope -p
# Delegate=yes).  Every selftest line must be [yes] in each (scripts/cgroup-v2-job.sh).
#
#   bash scripts/test-cgroup-v2.sh            # both callers (about 17 min under TCG)
#   VMLAB_MODE=user bash scripts/test-cgroup-v2.sh -k cgroup   # one caller, some tests
#
# Arguments go to pytest.  Skips (exit 0, saying why) when the lab is not there or its
# image is not built: building it needs a Debian mirror and PyPI, so it is never done
# here (run `bash lab/build-image.sh` once, as root).  Exit status: the lab's (the
# root job's when it failed, else the user job's).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
lab=${VMLAB_DIR:-$repo/lab}
state=${VMLAB_STATE:-${TMPDIR:-/tmp}/vmlab}

if [ ! -x "$lab/run-in-vm.sh" ] && [ ! -f "$lab/run-in-vm.sh" ]; then
    echo "test-cgroup-v2: skipped: no VM lab at $lab (set VMLAB_DIR to its folder)"
    exit 0
fi
if [ ! -f "$state/debian.img" ]; then
    echo "test-cgroup-v2: skipped: the lab's guest image is not built in $state;" \
        "build it once with: bash $lab/build-image.sh"
    exit 0
fi

# No arguments must stay no arguments: printf ' %q' with none prints an empty word, which
# pytest takes for the project's root (collecting examples/ and its own conftest.py).
quoted=""
[ "$#" -eq 0 ] || quoted=$(printf ' %q' "$@")
exec bash "$lab/run-in-vm.sh" -p "$repo" -m "${VMLAB_MODE:-both}" -- \
    "bash scripts/cgroup-v2-job.sh$quoted"
