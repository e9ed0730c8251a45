#!/usr/bin/env python3
"""ASE molecular dynamics on flashmace: the bundled Cu-Ni potential on a 108-atom CuNi alloy (the
LAMMPS examples' cell), Langevin at 600 K, then NVE; prints the energies every 100 steps.

    ~/.cache/flashmace/venv/bin/python examples/python/md.py [--steps 1000] [--device cuda] [--dtype float32]

(the README's Python section; docs/python.md)."""
import argparse
import os
import time

import numpy as np
from ase import units
from ase.build import bulk
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet

import flashmace

HERE = os.path.dirname(os.path.abspath(__file__))
POTENTIAL = os.path.join(HERE, "..", "..", "potentials", "CuNi-flashmace.safetensors")


def alloy(seed=0):
    atoms = bulk("Cu", "fcc", a=3.59, cubic=True).repeat(3)  # 108 atoms
    rng = np.random.default_rng(seed)
    atoms.numbers[rng.permutation(len(atoms))[: len(atoms) // 2]] = 28
    return atoms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="Langevin steps (then as many NVE steps / 5)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None)
    args = parser.parse_args(argv)

    atoms = alloy()
    atoms.calc = flashmace.Calculator(POTENTIAL, device=args.device, dtype=args.dtype)
    MaxwellBoltzmannDistribution(atoms, temperature_K=600, rng=np.random.default_rng(1))
    start = time.perf_counter()

    def report(dyn, label):
        e = atoms.get_potential_energy() / len(atoms)
        k = atoms.get_kinetic_energy() / len(atoms)
        print(f"{label} step {dyn.nsteps:5d}  Epot {e:.6f}  Ekin {k:.6f}  Etot {e + k:.6f} eV/atom  "
              f"T {atoms.get_temperature():6.1f} K", flush=True)

    langevin = Langevin(atoms, 2 * units.fs, temperature_K=600, friction=0.02, rng=np.random.default_rng(2))
    langevin.attach(lambda: report(langevin, "langevin"), interval=100)
    langevin.run(args.steps)
    nve = VelocityVerlet(atoms, 1 * units.fs)
    nve.attach(lambda: report(nve, "nve"), interval=100)
    nve.run(max(args.steps // 5, 100))
    seconds = time.perf_counter() - start
    steps = args.steps + max(args.steps // 5, 100)
    print(f"{steps} steps in {seconds:.1f} s ({1e3 * seconds / steps:.1f} ms/step); neighbour lists built: "
          f"{atoms.calc.session.list_builds}; engine: {atoms.calc.session.counters}")


if __name__ == "__main__":
    main()
