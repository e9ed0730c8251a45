"""bench/md_step.py (MD at engine speed: the engine, the kk style, the plain style of the Kokkos LAMMPS
and Debian's flashmace-lmp on the same deck) run on Kokkos's host backend with the tiny model: one
table with a row per atom count, rank count and runner, its ratios the quotients of its own ms/step
columns, the JSON the same numbers, neighbour-list rebuilds counted, the engine on the LAMMPS runs'
lattice, and a failing run stops the script with flashmace-bench's or LAMMPS's message.

The timed runs are short (20 steps), so the script's --skin option is set to 0.2 A: atoms at 300 K
move its half within a few femtoseconds, so LAMMPS rebuilds its lists during the timed run, which
is what the count must show (with the 2.0 A default, 20 steps rebuild nothing)."""
import json
import os
import subprocess
import sys

import lammps_harness as h
import pytest
from test_kokkos_style import LMP, PLUGIN

SCRIPT = os.path.join(h.SOURCE, "bench", "md_step.py")
BENCH = os.environ.get("FLASHMACE_BENCH", "")
ATOMS, RANKS, STEPS, WARMUP, FASTMACE = (108, 256), (1, 2), 20, 2, {108: 2.60}
# plain-lmp (Debian's LAMMPS, --plain-lmp) where this build has flashmace-lmp (CTest passes it when it does).
LAMMPS_RUNNERS = ("kk", "plain", "plain-lmp") if h.LMP else ("kk", "plain")

pytestmark = pytest.mark.skipif(not (LMP and PLUGIN and BENCH), reason="no Kokkos LAMMPS, flashmacekkplugin.so or "
                                "flashmace-bench")


def run_script(out, model=h.TINY, atoms=ATOMS, steps=STEPS, skin="0.2", thermo=None, trace=False):
    cmd = [sys.executable, SCRIPT, "--lmp", LMP, "--plugin", PLUGIN, "--bench", BENCH, "--plain-lmp", h.LMP,
           "--model", model, "--out", str(out), "--atoms", ",".join(map(str, atoms)),
           "--ranks", ",".join(map(str, RANKS)), "--device", "cpu", "--dtype", "float64", "--steps", str(steps),
           "--warmup", str(WARMUP), "--skin", skin, *(["--thermo", thermo] if thermo else []),
           "--fastmace-ms", ",".join(f"{a}:{ms}" for a, ms in FASTMACE.items()),
           "--mpirun", f"{h.MPIRUN[0]} --allow-run-as-root --oversubscribe", *(["--trace"] if trace else [])]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=h.lammps_env())


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("md_step")
    proc = run_script(out, trace=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((out / "md-step.json").read_text())["rows"]
    return out, (out / "md-step.md").read_text(), rows


def table_rows(table):
    """{(atoms, ranks, runner): {column: text}} of the markdown table."""
    # (the first table: the timelines' table follows it)
    text = table.splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("|"))
    lines = [line for line in text[start:] if line.startswith("|") or not line]
    lines = lines[: lines.index("")] if "" in lines else lines
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
        rows[(int(cells["atoms"]), int(cells["ranks"]), cells["runner"])] = cells
    return rows


def assert_quotient(printed, numerator, denominator):
    """`printed` (3 decimals) is numerator / denominator of two printed values, to their rounding."""
    a, b, q = float(numerator), float(denominator), float(printed)
    bound = 5e-4 + (a / b) * (5e-4 / a + 5e-4 / b) + 1e-9
    assert abs(q - a / b) <= bound, (printed, numerator, denominator)


def test_a_row_per_atoms_ranks_and_runner(result):
    _, table, rows = result
    expected = {(a, 1, "engine") for a in ATOMS} | {(a, r, s) for a in ATOMS for r in RANKS for s in LAMMPS_RUNNERS}
    assert {(r["atoms"], r["ranks"], r["runner"]) for r in rows} == expected
    assert set(table_rows(table)) == expected
    for r in rows:
        assert r["steps"] == STEPS and r["ms_per_step"] > 0, r


def test_the_json_equals_the_table(result):
    _, table, rows = result
    printed = table_rows(table)
    for r in rows:
        cells = printed[(r["atoms"], r["ranks"], r["runner"])]
        sections = r.get("section_ms_per_step")
        assert cells["ms/step"] == f"{r['ms_per_step']:.3f}"
        assert cells["Pair ms/step"] == (f"{sections['Pair']:.3f}" if sections else "")
        assert cells["Neigh ms/step"] == (f"{sections['Neigh']:.3f}" if sections else "")
        assert cells["neighbour builds"] == ("" if r["neighbor_builds"] is None else str(r["neighbor_builds"]))
        # On the CPU (this test) nothing crosses: the report prints no line and the column stays empty.
        assert r.get("reported_transfers") is None and cells["host<->device B/step"] == "", r
        for column, key in (("kk / engine", "kk_over_engine"), ("plain / kk", "plain_over_kk"),
                            ("FastMACE / kk", "fastmace_over_kk")):
            assert cells[column] == (f"{r[key]:.3f}" if key in r else ""), (column, r)
        assert r["command"] in table


def test_ratios_are_quotients_of_the_printed_times(result):
    _, table, _ = result
    printed = table_rows(table)
    for (atoms, ranks, runner), cells in printed.items():
        if runner == "kk":
            assert_quotient(cells["kk / engine"], cells["ms/step"], printed[(atoms, 1, "engine")]["ms/step"])
            if atoms in FASTMACE:
                assert_quotient(cells["FastMACE / kk"], FASTMACE[atoms], cells["ms/step"])
            else:
                assert cells["FastMACE / kk"] == ""
            assert cells["plain / kk"] == ""
        elif runner != "engine":
            assert_quotient(cells["plain / kk"], cells["ms/step"], printed[(atoms, ranks, "kk")]["ms/step"])
            assert cells["kk / engine"] == cells["FastMACE / kk"] == ""


def test_lammps_runs_count_their_neighbour_list_builds(result):
    _, _, rows = result
    for r in rows:
        if r["runner"] == "engine":
            assert r["neighbor_builds"] is None  # the engine does no MD
        else:
            assert isinstance(r["neighbor_builds"], int) and r["neighbor_builds"] >= 1, r
            assert r["section_ms_per_step"]["Neigh"] > 0 and r["section_ms_per_step"]["Pair"] > 0, r


def test_every_runner_runs_the_same_deck_on_the_engine_lattice(result):
    out, _, rows = result
    size = 1 + len(RANKS) * len(LAMMPS_RUNNERS)  # the script's order: each engine row, then its LAMMPS runs
    for atoms, start in zip(ATOMS, range(0, len(rows), size)):
        group = rows[start:start + size]
        engine = group[0]
        assert engine["runner"] == "engine" and f"--atoms {atoms} " in engine["command"]
        assert [r["atoms"] for r in group] == [atoms] * size
        assert "--lattice fcc --a 3.61 " in engine["command"] and " --elements Cu " in engine["command"]
        assert json.loads((out / f"engine-{atoms}.json").read_text())["result"]["atoms"] == atoms
        decks = {r["deck"].split("\n", 1)[-1] if r["runner"] != "plain-lmp" else r["deck"] for r in group[1:]}
        assert len(decks) == 1  # the same deck, the plugin load of the Kokkos LAMMPS aside
        deck = decks.pop()
        for line in ("neighbor 0.2 bin", "neigh_modify every 1 delay 0 check yes", "velocity all create 300 ",
                     "thermo 50", f"run {WARMUP}\nrun {STEPS}\n"):
            assert line in deck
        for r in group[1:]:
            assert (out / f"in.{r['runner']}-{atoms}-np{r['ranks']}").read_text() == r["deck"]
            assert f"-np {r['ranks']} " in r["command"]
            assert ("-sf kk" in r["command"]) == (r["runner"] == "kk")
            lmp = h.LMP if r["runner"] == "plain-lmp" else LMP
            assert r["command"].split(" -in ")[0].endswith(" " + os.path.abspath(lmp))


def test_one_rank_runs_carry_a_timeline_of_their_steps(result):
    out, table, rows = result
    timelines = table.split("Timelines (--trace", 1)[1].split("Commands", 1)[0]
    for r in rows:
        if r["ranks"] != 1:
            assert "trace" not in r
            continue
        t = r["trace"]
        # Six evaluations from the middle of the timed run: the first left out (the profiler's
        # start), four whole steps between the others' starts.
        assert (t["evaluations"], t["periods"], t["device_activity"]) == (6, 4, False), t
        assert 0 < t["host_inside_evaluate_ms"] <= t["wall_ms"], t
        # The traced steps are steps of the timed run: the same time within the profiler's overhead
        # and the machine's noise (a wrong evaluation window would take setup steps or none).
        assert 0.2 * r["ms_per_step"] < t["wall_ms"] < 5 * r["ms_per_step"], (t["wall_ms"], r["ms_per_step"])
        assert any(op["name"].startswith("aten::") for op in t["host_ops"]), t["host_ops"]
        assert (out / f"trace-{r['runner']}-{r['atoms']}.txt").read_text().startswith("6 evaluations traced")
        assert f"| {r['atoms']} | {r['runner']} | {t['wall_ms']:.3f} | (no device) |" in timelines


def test_a_failing_engine_run_stops_the_script_with_its_message(tmp_path):
    missing = str(tmp_path / "no-such-model.safetensors")
    proc = run_script(tmp_path, model=missing, atoms=(108,), steps=2)
    assert proc.returncode != 0
    assert "md_step.py: the engine run with 108 atoms failed" in proc.stderr
    assert f"Cannot open model file {missing}" in proc.stderr


def test_a_failing_lammps_run_stops_the_script_with_its_message(tmp_path):
    proc = run_script(tmp_path, atoms=(108,), steps=2, thermo="-1")  # (the engine run has no thermo)
    assert proc.returncode != 0
    assert "md_step.py: the kk run with 108 atoms on 1 rank(s) failed" in proc.stderr
    assert "ERROR: Illegal thermo command" in proc.stderr
