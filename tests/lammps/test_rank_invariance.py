"""The per-layer ghost exchange makes results independent of the MPI rank count: 1, 2 and 4 ranks
give the same step-0 energy and pressure (1e-10 relative) and the same 100-step NVE trajectory
(1e-8). With the exchange switched off (a debugging switch) 2 ranks do not, which shows this test
can fail; one rank gives the same numbers either way, because there every ghost atom is folded into
the owned atom it is a periodic image of: the engine's graph has no ghost rows, so nothing is
exchanged and nothing can go stale."""
import numpy as np
from lammps_harness import CUNI_DATA, TINY, run_lammps, thermo_rows

DECK = """units metal
atom_style atomic
atom_modify map array
newton on
read_data {data}
pair_style mace/flash exchange {exchange}
pair_coeff * * {model} Cu Ni
neighbor 1.0 bin
timestep 0.001
# loop geom: velocities depend on coordinates only, not on which rank owns an atom
velocity all create 800.0 4928459 mom yes rot yes dist gaussian loop geom
fix nve all nve
thermo_style custom step pe ke etotal press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
thermo 10
run {steps}
"""
PE, ETOTAL, PRESS = 1, 3, 4
PRESSURE_COMPONENTS = slice(4, 11)

# Same model, same edges, different summation order per rank count: float64 round-off (~1e-15
# relative measured) at step 0; over 100 steps MD amplifies it, still far below 1e-8.
STEP0_RTOL = 1e-10
TRAJECTORY_RTOL = 1e-8


def md(tmp_path, nprocs, steps=100, exchange="on"):
    workdir = tmp_path / f"np{nprocs}_{exchange}"
    workdir.mkdir()
    deck = DECK.format(data=CUNI_DATA, model=TINY, exchange=exchange, steps=steps)
    return thermo_rows(run_lammps(workdir, deck, nprocs))


def mismatch(rows, reference):
    """Largest difference relative to the reference's scale, per quantity: energies relative to
    themselves, pressure components relative to the largest pressure component."""
    energy = np.max(np.abs(rows[:, PE:ETOTAL + 1] - reference[:, PE:ETOTAL + 1]) / np.abs(reference[:, PE:ETOTAL + 1]))
    scale = np.max(np.abs(reference[:, PRESSURE_COMPONENTS]))
    pressure = np.max(np.abs(rows[:, PRESSURE_COMPONENTS] - reference[:, PRESSURE_COMPONENTS])) / scale
    return max(energy, pressure)


def test_rank_counts_agree_and_disagree_without_exchange(tmp_path):
    one = md(tmp_path, 1)
    assert one.shape == (11, 11)
    for nprocs in (2, 4):
        other = md(tmp_path, nprocs)
        assert other.shape == one.shape
        np.testing.assert_array_equal(other[:, 0], one[:, 0])
        step0, trajectory = mismatch(other[:1], one[:1]), mismatch(other, one)
        print(f"{nprocs} ranks vs 1: step 0 {step0:.2e}, 100 steps {trajectory:.2e} (relative)")
        assert step0 <= STEP0_RTOL, (nprocs, step0)
        assert trajectory <= TRAJECTORY_RTOL, (nprocs, trajectory)

    # Negative control: stale ghost features. On 2 ranks the ghosts of the other rank's atoms are
    # rows of the graph, and without the exchange the same 100-step run is far outside both
    # tolerances.
    off_one = md(tmp_path, 1, steps=0, exchange="off")
    stale_two = md(tmp_path, 2, exchange="off")
    print(f"exchange off vs on: 1 rank step 0 {mismatch(off_one, one[:1]):.2e}, "
          f"2 ranks step 0 {mismatch(stale_two[:1], one[:1]):.2e}, 100 steps {mismatch(stale_two, one):.2e}")
    assert mismatch(stale_two[:1], one[:1]) > 1e3 * STEP0_RTOL
    assert mismatch(stale_two, one) > 1e3 * TRAJECTORY_RTOL
    # One rank folds every ghost (a periodic image) into its owned atom: no ghost rows, nothing to
    # exchange, so switching the exchange off changes nothing there (with ghost rows it changed the
    # 1-rank energy by far more than STEP0_RTOL, so this fails if they come back unexchanged).
    assert off_one.shape == (1, 11)
    assert mismatch(off_one, one[:1]) <= STEP0_RTOL
    # ... so the stale result depends on the decomposition: off, 1 and 2 ranks disagree.
    assert mismatch(stale_two[:1], off_one) > 1e3 * STEP0_RTOL


EMPTY_RANK_DECK = """units metal
atom_style atomic
atom_modify map array
newton on
# 32 atoms in the first tenth of a long box: on 2 and 4 ranks some ranks own no atoms, and their
# ghosts (periodic images) have no edges, yet every rank must take part in every exchange
region box block 0 20 0 2 0 2
create_box 2 box
lattice fcc 3.6 origin 0.1 0.1 0.1
region left block 0 2 0 2 0 2 units lattice
create_atoms 1 region left
set type 1 type/fraction 2 0.5 12345
mass * 60.0
pair_style mace/flash
pair_coeff * * {model} Cu Ni
velocity all create 300 1234 loop geom
fix nve all nve
thermo_style custom step pe etotal press
thermo_modify format float %.17g
thermo 5
run 10
"""


def test_ranks_without_atoms_take_part_in_every_exchange(tmp_path):
    # Such a rank computes no gradients; without matching reverse exchanges its neighbours wait
    # forever (the timeout turns a deadlock into a failure).
    rows = {}
    for nprocs in (1, 2, 4):
        workdir = tmp_path / f"np{nprocs}"
        workdir.mkdir()
        rows[nprocs] = thermo_rows(run_lammps(workdir, EMPTY_RANK_DECK.format(model=TINY), nprocs, timeout=300))
    for nprocs in (2, 4):
        np.testing.assert_allclose(rows[nprocs], rows[1], rtol=TRAJECTORY_RTOL, atol=0)
