"""NVE energy conservation on the example (examples/lammps/in.md: 108-atom CuNi, float64, 1 fs):
1000 steps of velocity Verlet from 600 K.

Velocity Verlet conserves a shadow Hamiltonian: with forces that are the exact gradient of the
energy, the total energy fluctuates by O(dt^2) around a constant and does not drift. Measured on
this system (tiny-cuni-random model, 1 fs): largest excursion 2.6e-5 eV (2.4e-7 eV/atom) and a
fitted drift of 3.2e-6 eV per 1000 steps (3.0e-8 eV/atom), against kinetic-energy fluctuations of
0.14 eV. The bounds below are ~30x those numbers and still far below what wrong forces give
(an estimate, not a measured control): a force error dF does work dF.v every step; at 600 K atoms
move ~0.005 A/fs, so an error of 10% of a typical 0.05 eV/A force adds ~2.5e-5 eV per atom and
step, past the excursion bound within a step if systematic and within ~1000 steps if random."""
import shutil

import numpy as np
from lammps_harness import EXAMPLES, TINY, run_lammps, thermo_rows

NATOMS = 108
MAX_EXCURSION_PER_ATOM = 1e-5  # eV
MAX_DRIFT_PER_ATOM = 1e-6  # eV per 1000 steps
STEPS = 1000


def test_nve_conserves_energy(tmp_path):
    shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path)
    deck = open(f"{EXAMPLES}/in.md").read()
    out = run_lammps(tmp_path, deck, args=["-var", "model", TINY, "-var", "nvt_steps", "0", "-var", "nve_steps",
                                           str(STEPS), "-var", "thermo_every", "10"])
    header = next(line.split() for line in out.splitlines() if line.startswith("Step"))
    rows = thermo_rows(out)[1:]  # the first block is the 0-step NVT run
    step, etotal = rows[:, header.index("Step")], rows[:, header.index("TotEng")]
    assert step[0] == 0 and step[-1] == STEPS and len(step) == STEPS // 10 + 1
    excursion = np.max(np.abs(etotal - etotal[0])) / NATOMS
    drift = abs(np.polyfit(step, etotal, 1)[0]) * 1000 / NATOMS
    print(f"NVE {STEPS} steps: max |E - E0| = {excursion:.2e} eV/atom, drift = {drift:.2e} eV/atom per 1000 steps")
    assert excursion < MAX_EXCURSION_PER_ATOM, excursion
    assert drift < MAX_DRIFT_PER_ATOM, drift
