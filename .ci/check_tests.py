#!/usr/bin/env python3
"""CI's test accounting, so that the run cannot go green by testing less than it claims.

  check_tests.py inventory BUILD           before the run: every registered CTest test carries a
                                           label, every label is in .ci/expected_tests, and each has at
                                           least the number of tests given there;
  check_tests.py results BUILD JUNIT_XML   after `ctest --output-junit JUNIT_XML`: every registered
                                           test ran, and none was skipped except tests labelled gpu
                                           (no GPU on the CI machine).
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected_tests")
SKIPPABLE = {"gpu"}


def registered_tests(build):
    """{test name: [labels]} from `ctest --show-only=json-v1`."""
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True, text=True)
    tests = {}
    for test in json.loads(out.stdout)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        tests[test["name"]] = list(props.get("LABELS", []))
    return tests


def expected_minimums():
    table = {}
    with open(EXPECTED) as f:
        for line in f:
            words = line.split("#")[0].split()
            if words:
                table[words[0]] = int(words[1])
    return table


def inventory(build):
    tests = registered_tests(build)
    table = expected_minimums()
    problems = [f"test {name} has no CTest label" for name, labels in tests.items() if not labels]
    counts = {}
    for labels in tests.values():
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
    print(f"{len(tests)} CTest tests registered")
    print(f"  {'label':<12}{'tests':>7}{'minimum':>9}")
    for label in sorted(set(table) | set(counts)):
        have, want = counts.get(label, 0), table.get(label)
        print(f"  {label:<12}{have:>7}{'-' if want is None else want:>9}")
        if want is None:
            problems.append(f"label {label} ({have} tests) is not in {EXPECTED}: add it with its count")
        elif have < want:
            problems.append(f"label {label} has {have} tests, fewer than the {want} expected: a dependency "
                            f"missing at configure time, or tests removed without lowering {EXPECTED}")
    return problems


def results(build, junit):
    tests = registered_tests(build)
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    problems = [f"test {name} did not run" for name in sorted(set(tests) - {c.get("name") for c in cases})]
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    allowed = [name for name in skipped if SKIPPABLE & set(tests.get(name, []))]
    problems += [f"test {name} was skipped (labels {', '.join(tests.get(name, [])) or 'none'}): only gpu "
                 "tests may skip in CI" for name in skipped if name not in allowed]
    print(f"{len(cases)} tests run, {len(allowed)} gpu tests skipped (no GPU), "
          f"{len(skipped) - len(allowed)} other tests skipped")
    return problems


def main(argv):
    if len(argv) == 3 and argv[1] == "inventory":
        problems = inventory(argv[2])
    elif len(argv) == 4 and argv[1] == "results":
        problems = results(argv[2], argv[3])
    else:
        sys.exit(__doc__)
    for p in problems:
        print(f"check_tests: FAIL: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
