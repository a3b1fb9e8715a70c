#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole suite N times in a row (default 5) while a CPU hog runs beside it: no test may
# depend on an idle machine.  The hog is `stress-ng --cpu 2` (installed with apt-get when
# missing and possible), else two busy-loop shells; it is stopped on any exit.  One
# summary line per run, then the count of failed runs; exits non-zero if any failed.
# Extra arguments go to pytest (e.g. tests/security).  Logs: $STRESS_LOGS (a fresh
# temporary directory by default).
#
#   bash scripts/stress-test.sh            # 5 runs of the whole suite
#   N=2 bash scripts/stress-test.sh -x tests/security
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
PYSANDBOX_STRICT=1 .venv/bin/python -m pip install -q ".[test]"

runs="${N:-5}"
logs="${STRESS_LOGS:-$(mktemp -d -t pysandbox-stress-XXXXXX)}"
mkdir -p "$logs"

if ! command -v stress-ng >/dev/null && command -v apt-get >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    apt=($sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq)
    { "${apt[@]}" install -y stress-ng || { "${apt[@]}" update && "${apt[@]}" install -y stress-ng; }; } \
        >/dev/null 2>&1 || echo "stress-ng could not be installed: two busy loops instead" >&2
fi

hogs=()
stop_hogs() {
    local pid
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${hogs[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

if command -v stress-ng >/dev/null; then
    hog="stress-ng --cpu 2"
    stress-ng --cpu 2 --quiet &
    hogs+=("$!")
else
    hog="2 busy loops"
    for _ in 1 2; do
        bash -c 'while :; do :; done' &
        hogs+=("$!")
    done
fi

echo "$runs runs of the suite beside $hog on $(nproc) cores; logs in $logs"
failed=0
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.log"
    start=$SECONDS
    status=0
    .venv/bin/pytest -n auto -q -p no:cacheprovider "$@" >"$log" 2>&1 || status=$?
    summary="$(grep -E '^=* ?[0-9]+ (passed|failed|error)' "$log" | tail -1 | tr -d '=' || true)"
    printf 'run %d/%d: exit %d in %ds:%s\n' "$run" "$runs" "$status" "$((SECONDS - start))" \
        "${summary:- no summary, see $log}"
    if [ "$status" -ne 0 ]; then
        failed=$((failed + 1))
        grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' || true
    fi
done
echo "$failed of $runs runs failed beside $hog"
[ "$failed" -eq 0 ]
