"""NVE energy conservation on the example (examples/lammps/in.md: 108-atom CuNi, float64, 1 fs):
1000 steps of velocity Verlet from 600 K.

Velocity Verlet conserves a shadow Hamiltonian: with forces that are the exact gradient of the
energy, the total energy fluctuates by O(dt^2) around a constant and does not drift. Measured on
this system (tiny-cuni-random model, 1 fs): largest excursion 2.6e-5 eV (2.4e-7 eV/atom) and a
fitted drift of 3.2e-6 eV per 1000 steps (3.0e-8 eV/atom), against kinetic-energy fluctuations of
0.14 eV. The bounds below are ~30x those numbers and still far below what wrong forces give
(an estimate here; the negative control below measures one): a force error dF does work dF.v every step; at 600 K atoms
move ~0.005 A/fs, so an error of 10% of a typical 0.05 eV/A force adds ~2.5e-5 eV per atom and
step, past the excursion bound within a step if systematic and within ~1000 steps if random.

Negative control: the same run and check with a small non-conservative force added by fix addforce,
an "anti-friction" along each atom's velocity, F = GAMMA v (~1e-5 eV/A at ~5 A/ps: 0.02% of a
typical force). It does work GAMMA v^2 > 0 all the time; measured: drift 5.2e-5 eV/atom per 1000
steps (50x the bound), excursion 5.2e-5 eV/atom (5x), so the check must fail on it."""
import shutil

import numpy as np
from lammps_harness import EXAMPLES, TINY, run_lammps, thermo_rows

NATOMS = 108
MAX_EXCURSION_PER_ATOM = 1e-5  # eV
MAX_DRIFT_PER_ATOM = 1e-6  # eV per 1000 steps
STEPS = 1000
GAMMA = 2e-6  # eV ps / A^2: F = GAMMA v (eV/A with v in A/ps)
NVE_FIX = "fix             nve all nve\n"


def nve_energy_error(tmp_path, extra=""):
    """(largest |E - E0| per atom, fitted drift per atom per 1000 steps) of the example's NVE run,
    with `extra` commands after its fix nve."""
    shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path)
    deck = open(f"{EXAMPLES}/in.md").read()
    assert NVE_FIX in deck
    deck = deck.replace(NVE_FIX, NVE_FIX + extra)
    out = run_lammps(tmp_path, deck, args=["-var", "model", TINY, "-var", "nvt_steps", "0", "-var", "nve_steps",
                                           str(STEPS), "-var", "thermo_every", "10"])
    header = next(line.split() for line in out.splitlines() if line.startswith("Step"))
    rows = thermo_rows(out)[1:]  # the first block is the 0-step NVT run
    step, etotal = rows[:, header.index("Step")], rows[:, header.index("TotEng")]
    assert step[0] == 0 and step[-1] == STEPS and len(step) == STEPS // 10 + 1
    excursion = np.max(np.abs(etotal - etotal[0])) / NATOMS
    drift = abs(np.polyfit(step, etotal, 1)[0]) * 1000 / NATOMS
    print(f"NVE {STEPS} steps{' + fix addforce' if extra else ''}: max |E - E0| = {excursion:.2e} eV/atom, "
          f"drift = {drift:.2e} eV/atom per 1000 steps")
    return excursion, drift


def test_nve_conserves_energy(tmp_path):
    excursion, drift = nve_energy_error(tmp_path)
    assert excursion < MAX_EXCURSION_PER_ATOM, excursion
    assert drift < MAX_DRIFT_PER_ATOM, drift


def test_a_small_non_conservative_force_fails_the_drift_check(tmp_path):
    push = "".join(f"variable f{d} atom {GAMMA}*v{d}\n" for d in "xyz") + "fix push all addforce v_fx v_fy v_fz\n"
    excursion, drift = nve_energy_error(tmp_path, push)
    assert drift > 10 * MAX_DRIFT_PER_ATOM, drift
    assert excursion > MAX_EXCURSION_PER_ATOM, excursion
