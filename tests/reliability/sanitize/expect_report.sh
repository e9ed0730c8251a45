#!/usr/bin/env bash
# expect_report.sh PATTERN COMMAND...: passes when COMMAND exits with a non-zero status and its output
# contains PATTERN (the sanitizer canary: a report must fail the run that triggers it).
set -u
pattern=$1
shift
output=$("$@" 2>&1)
status=$?
tail -n 25 <<<"$output"
[ "$status" -ne 0 ] || { echo "expect_report: exit status 0: the report did not fail the run"; exit 1; }
grep -qF -- "$pattern" <<<"$output" || { echo "expect_report: no '$pattern' in the output"; exit 1; }
echo "expect_report: exit status $status and '$pattern', as expected"
