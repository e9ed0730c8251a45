#!/usr/bin/env bash
# expect_instrumented.sh EXE FUNCTION...: passes when each named project function, as linked into the
# sanitized twin EXE, calls AddressSanitizer's or UBSan's checks, i.e. the twin runs the instrumented
# copy of the library and not the plain one (the canaries prove only that the runtime reports).
# FUNCTION: the start of a demangled name, such as "flashmace::SafetensorsFile::load(".
set -u
exe=$1
shift
symbols=$(mktemp)
trap 'rm -f "$symbols"' EXIT
nm --defined-only "$exe" | awk '$2 == "T" {print $3}' > "$symbols"
status=0
for function in "$@"; do
  mangled=$(paste "$symbols" <(c++filt < "$symbols") | awk -F'\t' -v f="$function" 'index($2, f) == 1 {print $1; exit}')
  if [ -z "$mangled" ]; then
    echo "expect_instrumented: no function $function in $exe"
    status=1
    continue
  fi
  checks=$(objdump -d --no-show-raw-insn --disassemble="$mangled" "$exe" | grep -cE 'call.*<__(asan|ubsan)_')
  if [ "$checks" -eq 0 ]; then
    echo "expect_instrumented: $function in $exe calls no sanitizer check: the plain library was linked"
    status=1
  else
    echo "expect_instrumented: $function: $checks sanitizer calls"
  fi
done
exit $status
