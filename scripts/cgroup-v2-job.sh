#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The job scripts/test-cgroup-v2.sh runs in the lab's guest, from the project's root.
#
# As root it runs the suite and the selftest the way docs/deployment.rst tells a root service to
# run: in a systemd service with Delegate=yes and OOMPolicy=continue (without the
# latter, systemd stops a service as soon as the kernel OOM-kills a process anywhere in
# its cgroup, a sandbox over its memory cap included).  Then, as a container sees it: in
# a cgroup namespace of its own with cgroup2 mounted inside.  As a non-root user (the
# lab starts it in `systemd-run --user --scope -p Delegate=yes`), it runs them there.
# Arguments go to pytest.
set -uo pipefail

# The lab's emulated CPUs are many times slower than the machine the tests' CPU budgets
# and deadlines were sized on: measure how many (the CPU time of a trivial run_python,
# median of five, against the 0.01 s it costs on an idle development machine) and tell
# the tests (tests/support/timing.py: CPU_SCALE, SLOWDOWN).  Never below 1 (or 3).
measure_slowdown() {
    local scale
    scale=$(.venv/bin/python -I -c '
import math, statistics
from pysandbox import run_python
costs = [run_python("pass").cpu_time for _ in range(5)]
print(max(1, math.ceil(statistics.median(costs) / 0.01)))') || scale=1
    export PYSANDBOX_TEST_CPU_SCALE=$scale PYSANDBOX_TEST_SLOWDOWN=$scale
    echo "== CPU time here: $scale times the development machine's (PYSANDBOX_TEST_CPU_SCALE)"
}

suite() {
    local start tests selftest report
    measure_slowdown
    start=$(date +%s)
    .venv/bin/pytest -n auto -q -p no:cacheprovider -rfEs --durations=5 "$@"
    tests=$?
    echo "== pytest exit $tests in $(($(date +%s) - start)) s, in $(cut -d: -f3 /proc/self/cgroup)"
    # -I: from the checkout's root, plain -m would import the uncompiled source package.
    report=$(.venv/bin/python -I -m pysandbox --selftest)
    selftest=$?
    echo "$report"
    echo "== selftest exit $selftest"
    # A non-root caller's sandboxes spend its own per-uid epoll watches and pipe pages
    # (docs/security.rst, "Kernel budgets"): that line, and only that one, says NO.
    if [ "$(id -u)" != 0 ] && [ "$selftest" = 1 ] &&
        [ "$(grep -c '^\[NO ' <<<"$report")" = 1 ] &&
        grep -q '^\[NO \] kernel budgets: ' <<<"$report"; then
        selftest=0
        echo "== only the per-uid kernel budgets, as expected for a non-root caller"
    fi
    [ "$tests" = 0 ] && [ "$selftest" = 0 ]
}

container() {
    # The caller in the root group of a cgroup namespace, beside another process (as a
    # container's entry point and its children): the group's processes must move into
    # pysandbox-callers before the sandboxes get controllers.
    local group=/sys/fs/cgroup/pysandbox-lab-container sibling rc
    mkdir -p "$group"
    sleep 600 &
    sibling=$!
    echo "$sibling" >"$group/cgroup.procs"
    sh -c 'echo $$ > "$1/cgroup.procs" && exec unshare --cgroup --mount --propagation private \
        sh -c "umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo \"== in \$(cat /proc/self/cgroup)\" &&
               .venv/bin/python -I -m pysandbox --selftest &&
               echo \"== moved: \$(cat /sys/fs/cgroup/pysandbox-callers/cgroup.procs | wc -l) processes\""' \
        sh "$group"
    rc=$?
    kill "$sibling"
    wait "$sibling" 2>/dev/null
    echo "== container selftest exit $rc"
    return "$rc"
}

if [ "${1:-}" = --suite ]; then
    shift
    suite "$@"
    exit
fi
bash scripts/setup.sh >/dev/null 2>&1
PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]" 2>&1 | grep -v WARNING
if [ "$(id -u)" != 0 ]; then
    suite "$@"
    exit
fi
# First a system service without Delegate=yes, made for the purpose (the lab's own
# vmlab-run.service delegates, so the job's own group would not show it): every line but
# the placement must hold, and the placement must say why it does not.  OOMPolicy=continue
# so that the selftest's OOM-killed sandbox does not stop the unit under it.
echo "== selftest as root in a transient service without Delegate=yes"
report=$(systemd-run --wait --pipe --collect --quiet -p OOMPolicy=continue \
    --working-directory="$PWD" -- .venv/bin/python -I -m pysandbox --selftest)
echo "$report"
undelegated=0
[ "$(grep -c '^\[NO ' <<<"$report")" = 1 ] && grep -q '^\[NO \] cgroup placement: .*did not delegate' <<<"$report" || undelegated=1
echo "== undelegated selftest as expected: $([ "$undelegated" = 0 ] && echo yes || echo NO)"
if id -u lab >/dev/null 2>&1; then
    # A non-root caller in a group that is not its own (docs/deployment.rst shows this report).
    echo "== selftest as lab (uid $(id -u lab)) in $(cut -d: -f3 /proc/self/cgroup)"
    runuser -u lab -- .venv/bin/python -I -m pysandbox --selftest
    echo "== (exit $?: 1 expected)"
fi
systemd-run --wait --pipe --collect --quiet -p Delegate=yes -p OOMPolicy=continue \
    --working-directory="$PWD" -- bash scripts/cgroup-v2-job.sh --suite "$@"
service=$?
echo "== root service exit $service"
container
contained=$?
[ "$undelegated" = 0 ] && [ "$service" = 0 ] && [ "$contained" = 0 ]
