#!/bin/sh
# Runs every CUnit test program in DIR (and the tool tests, given the bin directory), sums
# their results and prints one closing line: "tests: N passed, N failed, N skipped". A test that
# called tfc_test_skip prints "SKIP SUITE.TEST: WHY"; it counts as skipped, not passed, and the
# SKIP lines are shown.
# Exit status: 0 only when every program ran to completion and no test failed.
dir=${1:?usage: run_tests.sh TESTDIR [BINDIR]}
export TFC_BIN=${2:-bin}
# DEBUG=1 builds: Open MPI's own leaks suppressed (tests/util/lsan.supp); no effect otherwise.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")" && pwd)/util/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0}
# and UBSan's reports fail the program that makes one (by default they are printed and the
# program goes on, so a test passed beside one: qsort on NULL, found 2026-11-30)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
passed=0 failed=0 skipped=0 status=0
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    name=${t##*/}
    log=$(mktemp)
    start=$(date +%s)
    "$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    # CUnit's summary line: "tests  Total  Ran  Passed  Failed  Inactive"
    line=$(awk '$1 == "tests" && NF >= 5 { print $4, $5 }' "$log" | tail -n 1)
    p=${line% *} f=${line#* }
    if [ -z "$line" ]; then p=0 f=1; fi
    k=$(grep -c '^SKIP ' "$log")
    passed=$((passed + p - k)) failed=$((failed + f)) skipped=$((skipped + k))
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        status=1
        echo "FAIL $name (exit $rc, ${secs}s)"
        grep -v -e '^ *Test: .*passed$' "$log" | tail -n 60
    else
        echo "ok   $name: $((p - k)) passed, $k skipped (${secs}s)"
        grep '^SKIP ' "$log" | sed 's/^/       /'
    fi
    rm -f "$log"
done
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
