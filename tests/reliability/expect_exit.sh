#!/usr/bin/env bash
# expect_exit.sh STATUS COMMAND...: passes when COMMAND exits with exactly STATUS (the skip protocol's
# negative control: tests/reliability/skip_protocol_probe.cpp).
set -u
want=$1
shift
"$@" > /dev/null 2>&1
status=$?
[ "$status" -eq "$want" ] || { echo "expect_exit: '$*' exited with $status, expected $want"; exit 1; }
echo "expect_exit: '$*' exited with $status, as expected"
