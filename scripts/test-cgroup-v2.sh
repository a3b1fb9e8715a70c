#!/usr/bin/env bash
# The whole test suite and the selftest on a real cgroup v2 + systemd host: a Debian 12
# guest of the VM lab (../shared/vmlab, see its README), once as root (a system service)
# and once as a non-root user in a delegated scope (systemd-run --user --scope -p
# Delegate=yes).  Every selftest line must be [yes] in both.
#
#   bash scripts/test-cgroup-v2.sh            # both callers (about 20 min under TCG)
#   VMLAB_MODE=user bash scripts/test-cgroup-v2.sh -k cgroup   # one caller, some tests
#
# Arguments go to pytest.  Skips (exit 0, saying why) when the lab is not there or its
# image is not built: building it needs a Debian mirror and PyPI, so it is never done
# here (run `bash ../shared/vmlab/build-image.sh` once).  Exit status: the lab's (the
# root job's when it failed, else the user job's).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
lab=${VMLAB_DIR:-$repo/../shared/vmlab}
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

quoted=$(printf ' %q' "$@")
job=$(cat <<JOB
set -o pipefail
bash scripts/setup.sh >/dev/null 2>&1
PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]" 2>&1 | grep -v WARNING
start=\$(date +%s)
.venv/bin/pytest -n auto -q -p no:cacheprovider -rfEs --durations=5$quoted; tests=\$?
echo "== pytest exit \$tests in \$(( \$(date +%s) - start )) s"
# -I: from the checkout's root, plain -m would import the uncompiled source package.
.venv/bin/python -I -m pysandbox --selftest; selftest=\$?
echo "== selftest exit \$selftest"
container=0
if [ "\$(id -u)" = 0 ]; then
    # A container's view: a cgroup namespace of its own, cgroup2 mounted inside it, the
    # caller in the namespace's root group (with a sibling process, as in a container).
    echo "== selftest as root in a cgroup namespace (a container's view)"
    group=/sys/fs/cgroup/pysandbox-lab-container
    mkdir -p "\$group"
    sleep 600 & sibling=\$!
    echo "\$sibling" > "\$group/cgroup.procs"
    sh -c 'echo \$\$ > '"\$group"'/cgroup.procs; exec unshare --cgroup --mount --propagation private sh -c "mount -t cgroup2 cgroup2 /sys/fs/cgroup && cat /proc/self/cgroup && .venv/bin/python -I -m pysandbox --selftest && ls /sys/fs/cgroup/pysandbox-callers >/dev/null && cat /sys/fs/cgroup/pysandbox-callers/cgroup.procs"'
    container=\$?
    kill "\$sibling"; wait "\$sibling" 2>/dev/null
    echo "== container selftest exit \$container"
fi
[ "\$tests" = 0 ] && [ "\$selftest" = 0 ] && [ "\$container" = 0 ]
JOB
)
exec bash "$lab/run-in-vm.sh" -p "$repo" -m "${VMLAB_MODE:-both}" -- "$job"
