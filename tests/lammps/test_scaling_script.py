"""bench/scaling.py (the multi-GPU scaling table and plot) run on CPU ranks with the tiny model:
strong and weak scaling on 1 and 2 ranks give tables whose numbers are those of LAMMPS's Loop
times, the weak lattice grows with the ranks, the PNG is written, and a failing run stops the
script with LAMMPS's message."""
import json
import os
import subprocess
import sys

import lammps_harness as h

SCRIPT = os.path.join(h.SOURCE, "bench", "scaling.py")


def run_script(tmp_path, mode, atoms, element="Cu", check=True):
    out = tmp_path / mode
    cmd = [sys.executable, SCRIPT, "--lmp", h.LMP, "--model", h.TINY, "--mode", mode, "--atoms", str(atoms),
           "--ranks", "2,1", "--out", str(out), "--device", "cpu", "--dtype", "float64", "--steps", "4",
           "--warmup", "1", "--element", element,
           "--mpirun", f"{h.MPIRUN[0]} --allow-run-as-root --oversubscribe"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=h.lammps_env())
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def check_rows(out, mode):
    data = json.loads((out / f"scaling-{mode}.json").read_text())
    rows = data["rows"]
    assert [r["ranks"] for r in rows] == [1, 2]  # sorted, whatever order they were asked in
    for r in rows:
        assert r["steps"] == 4 and r["loop_s"] > 0
        assert abs(r["ms_per_step"] - 1e3 * r["loop_s"] / 4) < 1e-9 * r["ms_per_step"]
        assert abs(r["atom_steps_per_s"] - r["atoms"] * 4 / r["loop_s"]) < 1e-9 * r["atom_steps_per_s"]
        assert f"run 4" in r["deck"] and (out / f"in.{mode}-{r['ranks']}").read_text() == r["deck"]
    assert rows[0]["efficiency"] == 1.0
    table = (out / f"scaling-{mode}.md").read_text()
    for r in rows:
        assert f"| {r['ranks']} | {r['atoms']} | {r['ms_per_step']:.2f} |" in table
        assert r["command"] in table
    png = (out / f"scaling-{mode}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000
    return rows


def test_strong_scaling_keeps_the_atoms(tmp_path):
    out, _ = run_script(tmp_path, "strong", 256)
    rows = check_rows(out, "strong")
    assert [r["atoms"] for r in rows] == [256, 256]
    base, two = rows
    assert abs(two["efficiency"] - base["loop_s"] / (2 * two["loop_s"])) < 1e-12


def test_weak_scaling_grows_the_lattice_with_the_ranks(tmp_path):
    out, _ = run_script(tmp_path, "weak", 108)
    rows = check_rows(out, "weak")
    assert [r["atoms"] for r in rows] == [108, 216]
    base, two = rows
    assert abs(two["efficiency"] - base["loop_s"] / two["loop_s"]) < 1e-12


def test_a_failing_run_stops_the_script_with_lammps_message(tmp_path):
    _, proc = run_script(tmp_path, "strong", 32, element="Si", check=False)
    assert proc.returncode != 0
    assert "scaling.py: the run on 1 rank(s) failed" in proc.stderr
    assert "ERROR" in proc.stderr and "Si" in proc.stderr
