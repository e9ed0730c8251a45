"""bench/rank_check.py (1 rank against several: step 0, trajectory and the halo-exchange report) run
on CPU ranks with the tiny model: 1, 2 and 4 ranks (a 1x2x2 grid) pass, their errors and exchange
values in the JSON and table are those of the runs' own output (one rank: no exchange report, its
ghosts folded into its own atoms), and with the exchange switched off (stale ghost features) the
script fails on 2 and 4 ranks, naming what differs, while one rank, which exchanges nothing, still
passes."""
import json
import os
import re
import subprocess
import sys

import lammps_harness as h

SCRIPT = os.path.join(h.SOURCE, "bench", "rank_check.py")
# The tiny model: 8x0e+8x1o, two interactions, so one exchanged layer of width 8 + 8 x 3.
WIDTH = 32


def run_script(tmp_path, name, *extra):
    out = tmp_path / name
    cmd = [sys.executable, SCRIPT, "--lmp", h.LMP, "--model", h.TINY, "--out", str(out), "--device", "cpu",
           "--atoms", "250", "--ranks", "4,1,2", "--steps", "20", "--thermo", "5",
           "--mpirun", f"{h.MPIRUN[0]} --allow-run-as-root --oversubscribe", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=h.lammps_env())
    return out, proc


def test_one_and_two_ranks_agree_and_exchange_one_row_per_ghost(tmp_path):
    out, proc = run_script(tmp_path, "on")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "rank-check.json").read_text())
    assert data["passed"] and data["reference_ranks"] == 1
    rows = data["rows"]
    assert [r["ranks"] for r in rows] == [1, 2, 4]  # sorted, whatever order they were asked in
    for r in rows:
        assert r["atoms"] == 256 and r["steps"] == 20 and not r["problems"]  # 4^3 cells: at least 250 atoms
        assert r["width"] == WIDTH
        assert max(r["step0"].values()) <= 1e-10 and max(r["trajectory"].values()) <= 1e-8
        # the run's own output: Nghost (ave over ranks) and the exchange report after run 0
        log = (out / f"lammps-np{r['ranks']}.log").read_text()
        nghost = [float(m) for m in re.findall(r"^Nghost:\s+([\d.]+) ave", log, re.M)]
        assert r["ghosts_step0"] == round(nghost[0] * r["ranks"]) > 0
        if r["ranks"] == 1:
            # LAMMPS has ghosts, but each is folded into the owned atom it is an image of: no ghost
            # rows in the engine's graph, nothing exchanged, no report
            assert r["reports"] == [] and "mace/flash halo exchange" not in log
            continue
        first, timed = r["reports"]
        assert sorted(first) == ["1 forward", "1 reverse"]
        for entry in first.values():
            assert entry["exchanges"] == 1 and entry["values"] == r["ghosts_step0"] * WIDTH
            assert abs(entry["kB"] - 8e-3 * entry["values"]) < 1e-3  # doubles sent through LAMMPS
        assert all(entry["exchanges"] == 21 for entry in timed.values())  # 20 steps and the setup
    assert rows[0]["step0"]["forces"] == 0.0  # the reference against itself
    assert rows[0]["ghosts_step0"] < rows[1]["ghosts_step0"] < rows[2]["ghosts_step0"]  # rank boundaries add ghosts
    table = (out / "rank-check.md").read_text()
    assert "Result: PASS" in table and "**FAIL**" not in table
    for r in rows:
        assert f"| {r['ranks']} | 256 | {r['ghosts_step0']} x {WIDTH} |" in table
        assert r["command"] in table
    assert "| none (ghosts folded) | none (ghosts folded) |" in table
    assert (f"rank_check: 1 rank(s), 256 atoms: step 0 0.00e+00, trajectory 0.00e+00, no exchange: one rank folds "
            f"its {rows[0]['ghosts_step0']} ghosts into its own atoms and exchanges nothing: pass") in proc.stdout


def test_stale_ghost_features_fail_the_check(tmp_path):
    out, proc = run_script(tmp_path, "off", "--exchange", "off")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((out / "rank-check.json").read_text())
    assert not data["passed"]
    one, two, four = data["rows"]
    # one rank has no ghost rows (folded into its atoms): nothing to exchange, nothing stale, it passes
    assert one["problems"] == [] and one["reports"] == []
    for other in (two, four):
        assert "0 halo-exchange report(s) in the output, expected 2 (one per run)" in other["problems"]
        assert any(p.startswith("step 0 forces differ from 1 rank(s)") for p in other["problems"]), other["problems"]
        assert other["step0"]["forces"] > 1e3 * 1e-10 and other["trajectory"]["thermo"] > 1e3 * 1e-8
    assert "Result: FAIL" in (out / "rank-check.md").read_text()
    assert "FAIL" in proc.stdout.splitlines()[-1]


def test_a_failing_run_is_reported_with_lammps_message(tmp_path):
    out, proc = run_script(tmp_path, "si", "--element", "Si", "--ranks", "1")
    assert proc.returncode == 1
    (row,) = json.loads((out / "rank-check.json").read_text())["rows"]
    assert row["problems"][0].startswith("the run failed (exit status 1): ERROR") and "Si" in row["problems"][0]
