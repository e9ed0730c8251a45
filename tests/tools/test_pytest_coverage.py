"""The check that every pytest case runs in some CTest test (.ci/check_pytest_coverage.py): this build
passes it, and a case that no test's -k selects is named and fails it."""
import importlib.util
import json
import os
import subprocess
import sys

SOURCE = os.environ.get("FLASHMACE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, ".ci", "check_pytest_coverage.py")


def load_checker():
    spec = importlib.util.spec_from_file_location("check_pytest_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_case_of_this_build_runs_in_some_ctest_test():
    proc = subprocess.run([sys.executable, SCRIPT, os.environ["FLASHMACE_BUILD_DIR"]], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all run by some CTest test" in proc.stdout


def test_a_case_no_selection_holds_is_uncovered():
    all_ids = {"a.py": ["a.py::t[np1]", "a.py::t[np2]", "a.py::t[np3]"], "b.py": ["b.py::u"]}
    selections = [("a.py", ["a.py::t[np1]"]), ("a.py", ["a.py::t[np2]"]), ("b.py", ["b.py::u"])]
    assert load_checker().uncovered(all_ids, selections) == [("a.py", "a.py::t[np3]")]
    assert load_checker().uncovered(all_ids, selections + [("a.py", ["a.py::t[np3]"])]) == []


def test_a_build_that_leaves_a_case_out_fails(tmp_path):
    """End to end: a fake `ctest` lists two tests of one file, -k np1 and -k np2; its np3 case runs in
    neither, and a third test selecting nothing is a problem too."""
    (tmp_path / "test_tiny.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('n', [1, 2, 3], ids=['np1', 'np2', 'np3'])\n"
        "def test_t(n):\n    pass\n")
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    tests = [{"name": f"x.{k}", "command": [*pytest, "-k", k, str(tmp_path / "test_tiny.py")],
              "properties": [{"name": "WORKING_DIRECTORY", "value": str(tmp_path)}]} for k in ("np1", "np2", "np4")]
    (tmp_path / "tests.json").write_text(json.dumps({"tests": tests}))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ctest").write_text(f"#!/bin/sh\ncat {tmp_path / 'tests.json'}\n")
    (tmp_path / "bin" / "ctest").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "test_tiny.py::test_t[np3]" in proc.stdout
    assert "test_t[np1]" not in proc.stdout and "test_t[np2]" not in proc.stdout
    assert "test x.np4 selects no case" in proc.stdout
    assert "check_pytest_coverage: 1 of 3 pytest cases in 1 files run by no CTest test, 1 collection problem(s)" \
        in proc.stdout
