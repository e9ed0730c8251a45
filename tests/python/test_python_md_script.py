"""bench/python_md.py (ASE MD through flashmace.Calculator against mace-torch's MACECalculator, and the
calculator's overhead over flashmace-bench) in a tiny CPU configuration: one row per atom count, its
ratios the quotients of its own columns, the table the JSON's numbers, and both runners' MD energy
the same (same model, atoms, velocities and steps: float64 round-off apart)."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench", "python_md.py")
BENCH = os.environ["FLASHMACE_BENCH"]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("python_md")
    cmd = [sys.executable, SCRIPT, "--atoms", "32,108", "--preset", "tiny-cuni", "--dtype", "float64", "--steps", "3",
           "--warmup", "1", "--bench", BENCH, "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((out / "python-md.json").read_text()), (out / "python-md.md").read_text()


def test_rows_ratios_and_energies(result):
    rows, table = result
    assert [r["atoms"] for r in rows] == [32, 108]
    for r in rows:
        assert r["speedup_over_mace"] == pytest.approx(r["mace_ms_per_step"] / r["flashmace_ms_per_step"])
        assert r["calculator_overhead"] == pytest.approx(r["flashmace_ms_per_step"] / r["bench_ms_per_step"] - 1)
        assert abs(r["flashmace_total_energy"] - r["mace_total_energy"]) <= 1e-9 * abs(r["mace_total_energy"])
        assert f"| {r['atoms']} | {r['flashmace_ms_per_step']:.2f} | {r['mace_ms_per_step']:.2f} |" in table
    assert "Made by:" in table
