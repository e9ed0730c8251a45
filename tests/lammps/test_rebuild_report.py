"""The end-of-run report of what the engine rebuilt (pair_style mace/flash, report_rebuilds), serially
and on 2 ranks: on atoms that do not move, the first evaluation builds the edge topology and the
radial pairs once per rank and every later step reuses them (the report counts what the engine did,
so a cache that stopped working, or a report that miscounts, fails here); a second run on the same
atoms counts from zero."""
import re

import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps

DECK = f"""units metal
atom_style atomic
atom_modify map array
read_data {CUNI_DATA}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
velocity all set 0.0 0.0 0.0
fix hold all setforce 0.0 0.0 0.0
fix nve all nve
run 20
run 20
"""
REPORT = re.compile(r"mace/flash engine during this run, summed over (\d+) rank\(s\): (\d+) evaluations, (\d+) "
                    r"edge-topology builds, (\d+) radial-pair builds, (\d+) CUDA graph captures, (\d+) graph "
                    r"replays; LAMMPS rebuilt the neighbour lists (\d+) times after the run's setup")


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_frozen_atoms_rebuild_nothing_after_the_first_step(tmp_path, nprocs):
    reports = [tuple(int(v) for v in m.groups()) for m in REPORT.finditer(run_lammps(tmp_path, DECK, nprocs))]
    assert len(reports) == 2, reports
    first, second = reports
    # ranks, evaluations (setup + 20 steps, per rank), topologies, pairings, captures, replays, lists
    assert first == (nprocs, 21 * nprocs, nprocs, nprocs, 0, 0, 0), first
    # The second run's setup builds the lists again, with the same pairs in the same order: the
    # engine's topology and pairs from the first run are reused.
    assert second == (nprocs, 21 * nprocs, 0, 0, 0, 0, 0), second
