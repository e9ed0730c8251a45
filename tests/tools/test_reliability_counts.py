"""The counts of docs/reliability.md are generated (.ci/reliability_counts.py): the page matches
.ci/expected_tests and tests/lammps/test_errors.py as they are now, and a minimum changed without
regenerating the page fails the check, with a diff naming the row."""
import os
import re
import subprocess
import sys

SOURCE = os.environ.get("FLASHMACE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, ".ci", "reliability_counts.py")
DOC = os.path.join(SOURCE, "docs", "reliability.md")
EXPECTED = os.path.join(SOURCE, ".ci", "expected_tests")


def check(*args):
    return subprocess.run([sys.executable, SCRIPT, "--check", *args], capture_output=True, text=True)


def test_the_page_has_the_counts_of_today():
    proc = check(DOC)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reliability_counts: " in proc.stdout and "matches" in proc.stdout


def test_a_minimum_raised_without_regenerating_the_page_fails(tmp_path):
    text = open(EXPECTED).read()
    raised = re.sub(r"^(tools\s+)(\d+)", lambda m: f"{m[1]}{int(m[2]) + 1}", text, count=1, flags=re.M)
    assert raised != text
    (tmp_path / "expected_tests").write_text(raised)
    proc = check(DOC, "--expected", str(tmp_path / "expected_tests"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^\+\| tools \| \d+ \|", proc.stdout, re.M), proc.stdout
    assert "is stale" in proc.stdout


def test_a_label_without_a_description_fails(tmp_path):
    (tmp_path / "expected_tests").write_text(open(EXPECTED).read() + "newlabel 1\n")
    proc = check(DOC, "--expected", str(tmp_path / "expected_tests"))
    assert proc.returncode != 0
    assert "label newlabel of" in proc.stdout + proc.stderr


def test_a_page_without_the_generated_blocks_fails(tmp_path):
    (tmp_path / "page.md").write_text("# Reliability\n\n| label | tests | what |\n")
    proc = check(str(tmp_path / "page.md"))
    assert proc.returncode == 1
    assert "has 0 generated blocks" in proc.stdout
