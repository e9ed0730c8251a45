#!/usr/bin/env python3
"""CI's test accounting, so that the run cannot go green by testing less than it claims.

  check_tests.py inventory BUILD           before the run: every registered CTest test carries a
                                           label, every label is in .ci/expected_tests, and each has at
                                           least the number of tests given there; no test turns its
                                           output into a skip (SKIP_REGULAR_EXPRESSION: GoogleTest's
                                           CMake module sets one matching "[  SKIPPED ]", so a failing
                                           case that prints it would count as skipped) unless it runs
                                           through tests/run_gtest.sh, which renames the marker: skips
                                           come only from the exit code 77 (tests/test_main.cpp);
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
# The launcher that keeps GoogleTest's skip pattern from matching (tests/CMakeLists.txt).
GTEST_LAUNCHER = "run_gtest.sh"


def registered_properties(build):
    """{test name: {property: value, "COMMAND": [argv]}} from `ctest --show-only=json-v1`."""
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True, text=True)
    return {test["name"]: {**{p["name"]: p["value"] for p in test.get("properties", [])},
                           "COMMAND": test.get("command", [])}
            for test in json.loads(out.stdout)["tests"]}


def registered_tests(build):
    """{test name: [labels]}."""
    return {name: list(props.get("LABELS", [])) for name, props in registered_properties(build).items()}


def output_skips(properties):
    """Tests that CTest would count as skipped from what they print."""
    problems = []
    for name, props in sorted(properties.items()):
        patterns = props.get("SKIP_REGULAR_EXPRESSION", [])
        patterns = [patterns] if isinstance(patterns, str) else patterns
        launched = any(os.path.basename(arg) == GTEST_LAUNCHER for arg in props["COMMAND"])
        if patterns and not launched:
            problems.append(f"test {name} is skipped when its output matches {patterns}: a failing test that prints "
                            "it would pass as skipped; skip through the exit code (SKIP_RETURN_CODE) instead")
    return problems


def expected_minimums():
    table = {}
    with open(EXPECTED) as f:
        for line in f:
            words = line.split("#")[0].split()
            if words:
                table[words[0]] = int(words[1])
    return table


def inventory(build):
    properties = registered_properties(build)
    tests = {name: list(props.get("LABELS", [])) for name, props in properties.items()}
    table = expected_minimums()
    problems = [f"test {name} has no CTest label" for name, labels in tests.items() if not labels]
    problems += output_skips(properties)
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
