"""bench/kokkos_style.py (the kk-against-plain timing table of the Kokkos LAMMPS) run on Kokkos's host
backend with the tiny model: both styles ran on the same lattice, the sections of LAMMPS's timing
breakdown add up to its Loop time, the table holds the measured numbers, and a failing run stops the
script with LAMMPS's message."""
import json
import os
import subprocess
import sys

import lammps_harness as h
from test_kokkos_style import LMP, PLUGIN

SCRIPT = os.path.join(h.SOURCE, "bench", "kokkos_style.py")


def run_script(out, atoms, element="Cu"):
    cmd = [sys.executable, SCRIPT, "--lmp", LMP, "--plugin", PLUGIN, "--model", h.TINY, "--atoms", atoms,
           "--out", str(out), "--device", "cpu", "--dtype", "float64", "--steps", "3", "--warmup", "1",
           "--element", element, "--mpirun", f"{h.MPIRUN[0]} --allow-run-as-root --oversubscribe"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=h.lammps_env())


def test_table_of_both_styles(tmp_path):
    proc = run_script(tmp_path, "108,256")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "kokkos-style.json").read_text())["rows"]
    assert [(r["style"], r["atoms"]) for r in rows] == [("plain", 108), ("kk", 108), ("plain", 256), ("kk", 256)]
    table = (tmp_path / "kokkos-style.md").read_text()
    for r in rows:
        assert r["steps"] == 3 and r["ranks"] == 1
        # LAMMPS's Other is the Loop time less the other sections: they add up (to its printed digits).
        total = sum(r["section_ms_per_step"].values())
        assert abs(total - r["ms_per_step"]) <= 1e-3 * r["ms_per_step"], (total, r["ms_per_step"])
        assert r["section_ms_per_step"]["Pair"] > 0
        assert abs(r["outside_pair"] - (1 - r["section_ms_per_step"]["Pair"] / total)) < 1e-12
        assert f"| {r['atoms']} | {r['style']} | {r['ms_per_step']:.3f} |" in table and r["command"] in table
        assert (tmp_path / f"in.{r['style']}-{r['atoms']}").read_text() == r["deck"]
    for plain, kk in zip(rows[::2], rows[1::2]):
        assert "-sf kk" in kk["command"] and "-sf kk" not in plain["command"]
        assert f"| {kk['ms_per_step'] / plain['ms_per_step']:.3f} |" in table


def test_a_failing_run_stops_the_script_with_lammps_message(tmp_path):
    proc = run_script(tmp_path, "32", element="Si")
    assert proc.returncode != 0
    assert "kokkos_style.py: the plain run with 32 atoms failed" in proc.stderr
    assert "ERROR" in proc.stderr and "Si" in proc.stderr
