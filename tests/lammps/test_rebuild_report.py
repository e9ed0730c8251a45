"""The end-of-run report of what the engine rebuilt (pair_style mace/flash, report_rebuilds), serially
and on 2 ranks. The pair style hands the engine LAMMPS's neighbour list, skin included, once per
list build, so the engine builds its edge topology and radial pairs exactly once per rank per list
build (the one at each run's setup included) and nothing on the steps in between, where only
positions change. On atoms that do not move LAMMPS builds its lists only at each run's setup: one
build per rank per run. On moving atoms LAMMPS rebuilds them B times after the setup (the report's
last number): 1 + B builds per rank. The report counts what the engine did, so a list hand-off that
rebuilt on every step, a build skipped at a list build, or a report that miscounts, fails here."""
import re

import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps

SETUP = f"""units metal
atom_style atomic
atom_modify map array
read_data {CUNI_DATA}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
"""

DECK = SETUP + """velocity all set 0.0 0.0 0.0
fix hold all setforce 0.0 0.0 0.0
fix nve all nve
run 20
run 20
"""

# Moving atoms: 600 K, a 1 A skin checked on every step and 2 fs steps, so that LAMMPS rebuilds its
# lists a few times (every ~30 steps) within 100 steps. The first run starts from the data file's
# near-perfect lattice, whose third neighbour shell (4.41 A) lies just inside the tiny model's r_max
# (4.5 A): in its first ~30 steps about a fifth of the edges within the cutoff leave it (4506 ->
# 3578 on one rank) before LAMMPS's skin check asks for a new list, which the engine's buckets
# must absorb (a leaving pair frees its pair row; padding edges share one row) without building
# again. The report's last clause counts the steps that outgrew a bucket: none here.
MOVING_DECK = SETUP + """neighbor 1.0 bin
neigh_modify every 1 delay 0 check yes
timestep 0.002
velocity all create 600.0 4928459 mom yes rot yes dist gaussian loop geom
fix nve all nve
thermo 20
run 100
run 100
"""
REPORT = re.compile(r"mace/flash engine during this run, summed over (\d+) rank\(s\): (\d+) evaluations, (\d+) "
                    r"edge-topology builds, (\d+) radial-pair builds, (\d+) CUDA graph captures, (\d+) graph "
                    r"replays; LAMMPS rebuilt the neighbour lists (\d+) times after the run's setup; (\d+) steps "
                    r"outgrew the engine's edge bucket")
NEIGHBOR_BUILDS = re.compile(r"^Neighbor list builds = (\d+)", re.M)


def reports(output):
    """Each run's report: (ranks, evaluations, topologies, pairings, captures, replays, list rebuilds,
    bucket overflows)."""
    return [tuple(int(v) for v in m.groups()) for m in REPORT.finditer(output)]


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_frozen_atoms_build_once_per_rank_per_run(tmp_path, nprocs):
    output = run_lammps(tmp_path, DECK, nprocs)
    found = reports(output)
    # A model on the CPU copies nothing between host and device: no line about it.
    assert "host<->device" not in output
    assert len(found) == 2, found
    first, second = found
    print(f"{nprocs} rank(s): first run {first}, second run {second}")
    # ranks, evaluations (setup + 20 steps, per rank), topologies, pairings, captures, replays, lists
    assert first == (nprocs, 21 * nprocs, nprocs, nprocs, 0, 0, 0, 0), first
    # The second run's setup builds LAMMPS's lists again, and the engine takes the new list: one
    # topology and one pairing per rank again (not zero), then nothing for the 20 steps.
    assert second == (nprocs, 21 * nprocs, nprocs, nprocs, 0, 0, 0, 0), second


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_moving_atoms_build_once_per_rank_per_list_build(tmp_path, nprocs):
    output = run_lammps(tmp_path, MOVING_DECK, nprocs)
    found = reports(output)
    assert len(found) == 2, found
    # LAMMPS's own count of the list builds after each run's setup (rank 0's, the same on all ranks)
    lammps_builds = [int(b) for b in NEIGHBOR_BUILDS.findall(output)]
    assert [r[6] for r in found] == lammps_builds, (found, lammps_builds)
    thermalise, measured = found
    print(f"{nprocs} rank(s): thermalising run {thermalise}, measured run {measured}")
    for ranks, evaluations, topologies, pairings, captures, replays, rebuilds, overflows in (thermalise, measured):
        assert ranks == nprocs and evaluations == 101 * nprocs and (captures, replays) == (0, 0)
        assert rebuilds > 0  # the atoms moved enough for LAMMPS to rebuild its lists
        # exactly one topology and one pairing per rank per list build (setup included): none on
        # the ~100 - B steps between list builds, and no bucket overflow
        assert overflows == 0, (thermalise, measured)
        assert topologies == nprocs * (1 + rebuilds), (thermalise, measured)
        assert pairings == nprocs * (1 + rebuilds), (thermalise, measured)


MEMORY = re.compile(r"mace/flash memory during this run, rank (\d+) of (\d+) \(the most in use\): process peak "
                    r"resident set ([0-9.]+) GiB, ([0-9.]+) KB per owned atom \((\d+) atoms\)")
LOOP_ATOMS = re.compile(r"^Loop time of [0-9.e+-]+ on \d+ procs for \d+ steps with (\d+) atoms", re.M)


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_memory_report_names_the_busiest_rank_and_its_atoms(tmp_path, nprocs):
    output = run_lammps(tmp_path, DECK, nprocs)
    found = MEMORY.findall(output)
    natoms = [int(n) for n in LOOP_ATOMS.findall(output)]
    assert len(found) == 2 and len(natoms) == 2, (found, natoms)
    for (rank, ranks, gib, kb_per_atom, owned), total in zip(found, natoms):
        assert 0 <= int(rank) < nprocs and int(ranks) == nprocs
        # One rank owns every atom; with two, the busiest owns some but not all.
        assert int(owned) == total if nprocs == 1 else 0 < int(owned) < total, (owned, total)
        # A LibTorch process holds more than 50 MiB and (on CI's machines) less than 64 GiB.
        assert 0.05 < float(gib) < 64, gib
        # The per-atom figure is the same memory divided by the owned atoms (as printed: 2 decimals).
        assert float(kb_per_atom) * int(owned) / 1024**2 == pytest.approx(float(gib), abs=0.006), (gib, kb_per_atom)
