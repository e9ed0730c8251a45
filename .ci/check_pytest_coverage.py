#!/usr/bin/env python3
"""Every pytest case runs in some CTest test.

  check_pytest_coverage.py BUILD

A pytest file is registered as one or more CTest tests, each maybe with `-k EXPR` (tests/CMakeLists.txt
and the flashmace_add_*_test functions of tests/*/CMakeLists.txt); a case whose id no `-k` of its file
selects is never run, and nothing says so. From `ctest --show-only=json-v1` in BUILD this finds every
test whose command runs pytest, lists each file's cases once (`pytest --collect-only`) and the cases
each test selects (the same with its `-k`), both through the test's own command line (`cmake -E env`,
its python) and ENVIRONMENT property, and prints every case that no test selects; exits 1 if there is
any, if a file cannot be collected (or is skipped at collection) or if a -k selects nothing. Collection imports the test modules but needs no built binary:
they read their paths from the environment and use them only when a test runs.
"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

VERBOSITY = {"-q", "-qq", "--quiet", "-v", "-vv", "--verbose"}


@dataclass
class PytestTest:
    name: str  # the CTest test
    file: str  # its test_*.py
    select: str  # its -k expression, "" for all
    prefix: list  # the command before `-m pytest`: `cmake -E env VAR=value... python`
    options: list  # pytest's options other than -k, verbosity and the file
    env: dict
    cwd: str


def pytest_tests(build):
    """The CTest tests of BUILD that run pytest, in registration order."""
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True, text=True)
    found = []
    for test in json.loads(out.stdout)["tests"]:
        command = test.get("command") or []
        at = next((i for i in range(1, len(command) - 1) if command[i:i + 2] == ["-m", "pytest"]), None)
        if at is None:
            continue
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = dict(os.environ)
        env.update(item.split("=", 1) for item in props.get("ENVIRONMENT", []))
        cwd = props.get("WORKING_DIRECTORY", build)
        args, select, files, options = command[at + 2:], "", [], []
        i = 0
        while i < len(args):
            if args[i] == "-k" and i + 1 < len(args):
                select, i = args[i + 1], i + 2
                continue
            if args[i].endswith(".py") and os.path.basename(args[i]).startswith("test_"):
                files.append(args[i])
            elif args[i] not in VERBOSITY:
                options.append(args[i])
            i += 1
        if len(files) != 1:
            raise SystemExit(f"check_pytest_coverage: test {test['name']} runs pytest on {len(files)} test_*.py "
                             f"files, expected one: {' '.join(command)}")
        found.append(PytestTest(test["name"], os.path.abspath(files[0]), select, command[:at], options, env,
                                cwd if os.path.isdir(cwd) else build))
    return found


def collect(test, select):
    """(node ids, problem or None): the cases of test's file that `-k select` picks ("": all of them)."""
    command = [*test.prefix, "-m", "pytest", *test.options, "--collect-only", "-q"]
    command += ["-k", select] if select else []
    proc = subprocess.run([*command, test.file], cwd=test.cwd, env=test.env, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if proc.returncode == 5 and select:  # pytest: no test selected
        return ids, f"test {test.name} selects no case of {test.file} with -k {select!r}"
    lines = output.strip().splitlines()
    if proc.returncode != 0 or (lines and "skipped" in lines[-1]):
        return ids, (f"cannot list the cases of {test.file} as test {test.name} sees it (pytest exit "
                     f"{proc.returncode}):\n  $ {' '.join(command)} {test.file}\n" + output[-3000:])
    return ids, None


def uncovered(all_ids, selections):
    """[(file, node id)] of all_ids ({file: node ids}) that no selection ((file, node ids) pairs) holds."""
    selected = {}
    for file, ids in selections:
        selected.setdefault(file, set()).update(ids)
    return [(file, i) for file in sorted(all_ids) for i in all_ids[file] if i not in selected.get(file, ())]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(argv[1])
    tests = pytest_tests(build)
    first = {}
    for test in tests:
        first.setdefault(test.file, test)
    # Each file's cases once, as its first test sees them; then each -k. Two at a time: a 2-core machine.
    with ThreadPoolExecutor(max_workers=2) as pool:
        listed = {file: pool.submit(collect, test, "") for file, test in first.items()}
        picked = [(test, pool.submit(collect, test, test.select)) for test in tests if test.select]
    all_ids = {file: job.result()[0] for file, job in listed.items()}
    problems = [job.result()[1] for job in [*listed.values(), *(job for _, job in picked)] if job.result()[1]]
    selections = [(test.file, job.result()[0]) for test, job in picked]
    selections += [(test.file, all_ids[test.file]) for test in tests if not test.select]
    missing = uncovered(all_ids, selections)
    for file in sorted({f for f, _ in missing}):
        runs = ", ".join(f"{t.name} (-k {t.select!r})" if t.select else t.name for t in tests if t.file == file)
        print(f"{file}: cases run by no CTest test (the file's tests: {runs}):")
        print("".join(f"  {i}\n" for f, i in missing if f == file), end="")
    for problem in problems:
        print(problem)
    cases = sum(len(ids) for ids in all_ids.values())
    if missing or problems:
        print(f"check_pytest_coverage: {len(missing)} of {cases} pytest cases in {len(all_ids)} files run by no "
              f"CTest test, {len(problems)} collection problem(s)")
        return 1
    print(f"check_pytest_coverage: {cases} pytest cases in {len(all_ids)} files, all run by some CTest test")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
