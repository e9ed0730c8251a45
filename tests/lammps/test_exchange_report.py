"""The halo-exchange report of pair_style mace/flash at the end of each run: per exchanged layer and
direction, the exchanges made and the values they moved, which must be one row of node features
(the model's hidden irreps) for every ghost atom LAMMPS reports (its Nghost statistics), on 2 ranks
(through LAMMPS's communication); one report per run, none with the exchange switched off. One
rank prints none: there every ghost atom is folded into the owned atom it is a periodic image of,
so the engine's graph has no ghost rows and nothing is exchanged."""
import re

import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps

DECK = """units metal
atom_style atomic
atom_modify map array
newton on
read_data {data}
pair_style mace/flash exchange {exchange}
pair_coeff * * {model} Cu Ni
neighbor 1.0 bin
timestep 0.001
velocity all create 800.0 4928459 mom yes rot yes dist gaussian loop geom
fix nve all nve
{runs}
"""
# (kB and ms are "-" for an exchange in place in the model's memory, which the pair style no longer
# makes: one rank folds its ghosts and exchanges nothing)
ROW = re.compile(r"^\s+(\d+)\s+(forward|reverse)\s+(\d+)\s+([\d.]+)\s+([\d.]+|-)\s+([\d.]+|-)\s+([\d.]+|-)\s*$")


def irreps_dim(irreps):
    """Dimension of an e3nn irreps string such as 8x0e+8x1o."""
    return sum(int(mul) * (2 * int(l) + 1) for mul, l in re.findall(r"(\d+)x(\d+)[eo]", irreps))


def reports(output):
    """Each report as {(layer, direction): (exchanges, values per exchange)}, in output order."""
    found, current = [], None
    for line in output.splitlines():
        if line.startswith("mace/flash halo exchange"):
            current = {}
            found.append(current)
        elif current is not None and (m := ROW.match(line)):
            current[(int(m[1]), m[2])] = (int(m[3]), float(m[4]))
        elif current is not None and not line.startswith("  layer"):
            current = None
    return found


def ghosts(output):
    """Ghost atoms over all ranks at the end of each run (LAMMPS's "Nghost: ave max min" lines)."""
    return [float(m[1]) for m in re.finditer(r"^Nghost:\s+([\d.]+) ave", output, re.M)]


def run(tmp_path, nprocs, runs, exchange="on"):
    workdir = tmp_path / f"np{nprocs}_{exchange}_{len(runs)}"
    workdir.mkdir()
    return run_lammps(workdir, DECK.format(data=CUNI_DATA, model=TINY, exchange=exchange, runs="\n".join(runs)),
                      nprocs)


def test_report_counts_one_feature_row_per_ghost_atom(tmp_path):
    nprocs = 2
    output = run(tmp_path, nprocs, ["run 0"])
    width = irreps_dim(re.search(r"hidden irreps (\S+),", output)[1])
    (report,), (nghost_ave,) = reports(output), ghosts(output)
    total_ghosts = nghost_ave * nprocs
    assert width > 0 and total_ghosts > 0
    # the tiny model has two interactions: one exchanged layer, forward and reverse
    assert sorted(report) == [(1, "forward"), (1, "reverse")], report
    assert "staged through host memory" in output and "in place on the model's device" not in output
    for direction in ("forward", "reverse"):
        exchanges, values = report[(1, direction)]
        print(f"{nprocs} rank(s), {direction}: {values:.0f} values, {total_ghosts:.0f} ghosts x {width}")
        assert exchanges == 1
        assert values == total_ghosts * width


def test_one_rank_folds_its_ghosts_and_reports_no_exchange(tmp_path):
    output = run(tmp_path, 1, ["run 0", "run 5"])
    # LAMMPS has ghost atoms (periodic images) on one rank too, and both runs finished (the engine's
    # report is printed once per run, next to where the exchange report would be) ...
    nghost = ghosts(output)
    assert len(nghost) == 2 and min(nghost) > 0, nghost
    assert output.count("mace/flash engine during this run, summed over 1 rank(s)") == 2
    print(f"1 rank: Nghost {nghost}, halo-exchange reports {len(reports(output))}")
    # ... but the engine's graph has no ghost rows (each folded into its owned atom), so nothing is
    # exchanged, in place or otherwise, and no report is printed
    assert "mace/flash halo exchange" not in output
    assert not reports(output)


def test_one_report_per_run_and_none_without_exchange(tmp_path):
    output = run(tmp_path, 2, ["run 5", "run 3"])
    first, second = reports(output)
    assert first[(1, "forward")][0] == 6 and second[(1, "forward")][0] == 4  # the setup's evaluation too
    assert first[(1, "reverse")][0] == 6 and second[(1, "reverse")][0] == 4
    assert not reports(run(tmp_path, 2, ["run 5"], exchange="off"))
