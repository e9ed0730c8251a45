"""examples/python/md.py runs (1,000 Langevin steps with the bundled potential, as the README
shows), and NVE on the calculator conserves energy: over 300 steps of 1 fs at ~600 K the total
energy stays within 1e-4 eV/atom of its start while the potential energy moves by orders of
magnitude more (a negative control: the same run with forces scaled by 1.01 drifts beyond it)."""
import os
import subprocess
import sys

import numpy as np
from ase import units
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet

import flashmace

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "md.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))
import md  # noqa: E402  (the example, for its structure and potential)


def test_example_runs_1000_langevin_steps():
    done = subprocess.run([sys.executable, EXAMPLE, "--steps", "1000"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith(("langevin", "nve"))]
    assert len(lines) >= 12, done.stdout
    print(done.stdout.splitlines()[-1])


class Scaled(flashmace.Calculator):
    def calculate(self, *args, **kwargs):
        super().calculate(*args, **kwargs)
        self.results["forces"] = self.results["forces"] * 1.01


def nve_spread(calc_type):
    atoms = md.alloy()
    atoms.calc = calc_type(md.POTENTIAL)
    MaxwellBoltzmannDistribution(atoms, temperature_K=1200, rng=np.random.default_rng(3))
    totals, potentials = [], []

    def record():
        potentials.append(atoms.get_potential_energy() / len(atoms))
        totals.append(potentials[-1] + atoms.get_kinetic_energy() / len(atoms))

    dyn = VelocityVerlet(atoms, 1 * units.fs)
    dyn.attach(record, interval=10)
    dyn.run(300)
    return np.ptp(totals), np.ptp(potentials)


def test_nve_conserves_energy():
    total, potential = nve_spread(flashmace.Calculator)
    print(f"NVE 300 steps: total energy spread {total:.2e} eV/atom, potential energy spread {potential:.2e}")
    assert total < 1e-4 and potential > 100 * total
    wrong, _ = nve_spread(Scaled)
    print(f"forces x 1.01: total energy spread {wrong:.2e} eV/atom")
    assert wrong > 1e-4
