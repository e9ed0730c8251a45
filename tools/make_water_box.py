#!/usr/bin/env python3
"""Write a periodic box of liquid-like water as extended XYZ, for flashmace-bench --xyz and the
LAMMPS decks: rigid H2O molecules (O-H 0.9572 A, H-O-H 104.52 deg) at the centres of a simple cubic
grid whose spacing gives the requested density, each rotated at random and shifted by up to
--jitter A, re-drawn until no two atoms of different molecules are closer than 1.5 A. Deterministic
for a given seed. No relaxation: a benchmark structure with realistic
composition and neighbour counts (about 2 molecules per 3.1 A), not an equilibrated liquid.

Usage: make_water_box.py OUT.xyz --molecules N [--density 1.0] [--jitter 0.3] [--seed 1]
N is rounded up to the next cube (n^3 molecules on an n x n x n grid).
"""
import argparse
import math

import numpy as np

OH = 0.9572      # A
HOH = 104.52     # degrees
MASS = 18.01528  # g/mol
MIN_CONTACT = 1.5  # A, the closest two atoms of different molecules may come (liquid water: H...H ~2 A)
AVOGADRO = 6.02214076e23


def molecule():
    """O, H, H positions of one molecule, centred on its oxygen, in the xz plane."""
    half = math.radians(HOH) / 2
    return np.array([[0.0, 0.0, 0.0],
                     [OH * math.sin(half), 0.0, OH * math.cos(half)],
                     [-OH * math.sin(half), 0.0, OH * math.cos(half)]])


def random_rotation(rng):
    """A uniformly random rotation matrix (from a random unit quaternion)."""
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def water_box(molecules, density, jitter, seed):
    """(atomic numbers, positions [N, 3], box side) of n^3 >= molecules molecules."""
    n = max(1, math.ceil(round(molecules ** (1 / 3), 9)))
    volume = n ** 3 * MASS / AVOGADRO / density * 1e24  # A^3
    side = volume ** (1 / 3)
    spacing = side / n
    if jitter < 0 or jitter > spacing / 4:
        raise SystemExit(f"make_water_box: --jitter must be between 0 and {spacing / 4:.3f} A (a quarter of the "
                         f"{spacing:.3f} A grid spacing), so that molecules cannot overlap")
    rng = np.random.default_rng(seed)
    placed = np.zeros((0, 3))
    for i in range(n):
        for j in range(n):
            for k in range(n):
                placed = np.concatenate([placed, place(placed, (np.array([i, j, k]) + 0.5) * spacing, side, jitter,
                                                       rng)])
    return np.tile([8, 1, 1], n ** 3), placed % side, side


def place(placed, site, side, jitter, rng, tries=200):
    """One molecule near `site`, rotated at random until no atom is closer than MIN_CONTACT to an atom
    of the molecules placed before (minimum image)."""
    for _ in range(tries):
        atoms = molecule() @ random_rotation(rng).T + site + rng.uniform(-jitter, jitter, 3)
        d = atoms[:, None, :] - placed[None, :, :]
        d -= side * np.round(d / side)
        if placed.size == 0 or np.sqrt((d * d).sum(-1)).min() >= MIN_CONTACT:
            return atoms
    raise SystemExit(f"make_water_box: no orientation keeps {MIN_CONTACT} A from the neighbours after {tries} tries; "
                     "lower --density or --jitter")


def write_extxyz(path, numbers, positions, side):
    symbols = {1: "H", 8: "O"}
    with open(path, "w") as f:
        f.write(f"{len(numbers)}\n")
        f.write(f'Lattice="{side} 0 0 0 {side} 0 0 0 {side}" Properties=species:S:1:pos:R:3 pbc="T T T"\n')
        for z, (x, y, w) in zip(numbers, positions):
            f.write(f"{symbols[z]} {x:.10f} {y:.10f} {w:.10f}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--molecules", type=int, required=True)
    parser.add_argument("--density", type=float, default=1.0, help="g/cm^3 (default 1.0)")
    parser.add_argument("--jitter", type=float, default=0.3, help="A, uniform shift of each molecule (default 0.3)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.molecules < 1 or args.density <= 0:
        parser.error("--molecules must be >= 1 and --density > 0")
    numbers, positions, side = water_box(args.molecules, args.density, args.jitter, args.seed)
    write_extxyz(args.out, numbers, positions, side)
    print(f"wrote {args.out}: {len(numbers) // 3} molecules, {len(numbers)} atoms, box {side:.4f} A, "
          f"{args.density} g/cm^3")


if __name__ == "__main__":
    main()
