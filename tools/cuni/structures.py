"""Cu-Ni structures for the training set: fcc supercells in any orientation, random alloy
occupations, homogeneous strains, vacancies, slabs with vacuum. Plain numpy; every random choice
takes the caller's numpy Generator, so a seed fixes the structure.

Conventions: a cell is a 3x3 array whose rows are the lattice vectors; positions are Cartesian
(N, 3) in Angstrom; species are atomic numbers."""
from dataclasses import dataclass

import numpy as np

CU, NI = 29, 28
# fcc conventional cell: four atoms at these fractional positions.
FCC_BASIS = np.array([[0.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
# Surface cells: three orthogonal directions (integer Miller indices) with the surface normal last.
ORIENTATIONS = {
    "100": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "110": ((0, 0, 1), (1, -1, 0), (1, 1, 0)),
    "111": ((1, -1, 0), (1, 1, -2), (1, 1, 1)),
}


@dataclass
class Structure:
    species: np.ndarray    # (N,) atomic numbers
    positions: np.ndarray  # (N, 3)
    cell: np.ndarray       # (3, 3), rows are lattice vectors

    def __len__(self):
        return len(self.species)

    @property
    def volume(self):
        return abs(float(np.linalg.det(self.cell)))


def fcc_period(direction):
    """Length (in units of a) of the shortest fcc translation along an integer direction: the fcc
    translations are a/2 (h, k, l) with h + k + l even, so d/2 is one when the sum of d is even."""
    d = np.asarray(direction, dtype=float)
    return np.linalg.norm(d) * (0.5 if int(sum(direction)) % 2 == 0 else 1.0)


def fcc_oriented(a, orientation, reps):
    """fcc crystal of lattice constant a with the cell axes along ORIENTATIONS[orientation],
    repeated reps = (n1, n2, n3) times along them; the cell is orthorhombic and axis-aligned."""
    dirs = np.array(ORIENTATIONS[orientation], dtype=float)
    rotation = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    lengths = np.array([a * fcc_period(d) * n for d, n in zip(ORIENTATIONS[orientation], reps)])
    # Enumerate conventional-cell lattice points in a cube that covers the rotated cell, then keep
    # those whose coordinates along the new axes fall in [0, L).
    span = int(np.ceil(lengths.max() / a * np.sqrt(3))) + 1
    grid = np.stack(np.meshgrid(*[np.arange(-span, span + 1)] * 3, indexing="ij"), -1).reshape(-1, 3)
    points = a * (grid[:, None, :] + FCC_BASIS[None, :, :]).reshape(-1, 3)
    local = points @ rotation.T
    tol = 1e-8 * a
    inside = np.all((local > -tol) & (local < lengths - tol), axis=1)
    positions = local[inside]
    expected = int(round(np.prod(lengths) / (a ** 3 / 4)))
    if len(positions) != expected:
        raise RuntimeError(f"fcc {orientation} cell {reps}: found {len(positions)} atoms, expected {expected}")
    order = np.lexsort((positions[:, 0], positions[:, 1], positions[:, 2]))
    return Structure(np.full(expected, CU), positions[order], np.diag(lengths))


def fcc_cubic(a, reps):
    return fcc_oriented(a, "100", reps)


def vegard_lattice(x_ni, a_cu, a_ni):
    """Lattice constant of the alloy by linear interpolation (Vegard's law): a starting point that
    the sampled volume strains scatter around, not a claim about the potential."""
    return (1.0 - x_ni) * a_cu + x_ni * a_ni


def random_alloy(structure, x_ni, rng):
    """Exactly round(x_ni * N) Ni atoms on randomly chosen sites, Cu on the rest."""
    n = len(structure)
    species = np.full(n, CU)
    species[rng.permutation(n)[:int(round(x_ni * n))]] = NI
    return Structure(species, structure.positions.copy(), structure.cell.copy())


def strained(structure, strain):
    """Homogeneous deformation r -> r (I + strain) of the cell and the atoms (row vectors)."""
    deform = np.eye(3) + np.asarray(strain, dtype=float)
    return Structure(structure.species.copy(), structure.positions @ deform, structure.cell @ deform)


def random_strain(rng, normal, shear):
    """Symmetric strain with normal components in [-normal, normal] and shear in [-shear, shear]."""
    eps = np.diag(rng.uniform(-normal, normal, 3))
    for i, j in ((0, 1), (0, 2), (1, 2)):
        eps[i, j] = eps[j, i] = rng.uniform(-shear, shear)
    return eps


def rattled(structure, sigma, rng):
    """Independent Gaussian displacements of standard deviation sigma (Angstrom) on every atom."""
    moved = structure.positions + rng.normal(0.0, sigma, structure.positions.shape)
    return Structure(structure.species.copy(), moved, structure.cell.copy())


def with_vacancies(structure, count, rng):
    keep = np.sort(rng.permutation(len(structure))[count:])
    return Structure(structure.species[keep], structure.positions[keep], structure.cell.copy())


def slab(structure, vacuum):
    """Open the third cell vector by `vacuum` Angstrom (two free surfaces normal to it) and centre
    the atoms in the new cell. Needs an orthorhombic cell with its third vector along z."""
    cell = structure.cell.copy()
    cell[2, 2] += vacuum
    positions = structure.positions + np.array([0.0, 0.0, vacuum / 2])
    return Structure(structure.species.copy(), positions, cell)
