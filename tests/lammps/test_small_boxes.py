"""pair_style mace/flash in boxes smaller than the cutoff: every cell edge (and the spacing of every
set of lattice planes) is shorter than r_max = 5 A, so each atom sees many periodic images of the
other atoms and of itself among its neighbours. On one rank every ghost atom is folded into the
owned atom it is a periodic image of (edges whose sender is the owned atom, with an integer lattice
offset); on two ranks (processors 2 1 1: subdomains of 1.5-1.8 A, thinner than the ghost shell, so
ghosts come through multi-hop swaps) the ghosts are rows of the graph and their features travel
through the per-layer exchange.

Truth: flashmace-eval --path reference in float64 (the reference path on the engine's own periodic
neighbour list, no LAMMPS) on the same structure. Compared: energy (1e-12 relative), per-atom
energies, forces and the virial (1e-10 eV, eV/A); plus a 20-step NVE run on 1 rank against 2 ranks.
On one rank *exchange off* changes nothing (nothing is exchanged); on two it must be far off (the
negative control). The NVE run drifts the atoms along -x so that some cross between the ranks.
Structures are given in LAMMPS's frame (cell rows lower triangular), so nothing is rotated."""
import itertools
import json
import os
import re
import subprocess

import numpy as np
import pytest
from lammps_harness import STEP0_OUTPUT, run_lammps, step0_results, thermo_rows, write_data, write_extxyz

MODELS = os.environ.get("FLASHMACE_EXPORTED_MODEL_DIR", "")
EVAL = os.environ.get("FLASHMACE_EVAL", "")
MODEL = "small_l1"  # float64, Ni and Cu, r_max 5.0 A, two interactions
R_MAX = 5.0

# (atomic numbers, fractional coordinates, cell rows: a along x, b in the xy plane, c general).
BOXES = {
    # distorted fcc conventional cell (a ~ 3.6 A), 4 atoms
    "ortho4": ([29, 28, 29, 28],
               [[0.02, 0.03, -0.01], [0.51, 0.47, 0.04], [0.46, -0.03, 0.52], [0.03, 0.52, 0.49]],
               [[3.55, 0.0, 0.0], [0.0, 3.7, 0.0], [0.0, 0.0, 3.85]]),
    # triclinic, all three tilts (xy 1.2 <= lx/2, xz 0.8 <= lx/2, |yz| 0.9 <= ly/2), 3 atoms
    "tri3": ([29, 28, 28],
             [[0.02, 0.1, 0.15], [0.37, 0.55, 0.3], [0.67, 0.25, 0.72]],
             [[3.3, 0.0, 0.0], [1.2, 3.5, 0.0], [0.8, -0.9, 3.6]]),
    # triclinic, negative xy, 2 atoms in 27.8 A^3: each atom's own images from 3.0 A
    "tri2": ([28, 29],
             [[0.16, 0.2, 0.05], [0.51, 0.9, 0.65]],
             [[3.0, 0.0, 0.0], [-1.4, 2.9, 0.0], [1.2, 1.1, 3.2]]),
}

# float64, the same edges summed in another order (LAMMPS's neighbour order, folded images or ghost
# rows, MPI sums): round-off only, measured <= 4e-16 relative on the energy and <= 2e-15 eV, eV/A on
# per-atom energies, forces and the virial, on 1 and 2 ranks.
ENERGY_RTOL = 1e-12
TOL64 = 1e-10  # eV, eV/A: per-atom energies, forces, virial
# 20 MD steps amplify the step-0 round-off: measured <= 1e-14 relative, far below this.
TRAJECTORY_RTOL = 1e-10

STEP0_DECK = """units metal
atom_style atomic
atom_modify map array
newton on
{processors}
read_data s.data
pair_style mace/flash {style}
pair_coeff * * {model} {elements}
""" + STEP0_OUTPUT

NVE_DECK = """units metal
atom_style atomic
atom_modify map array
newton on
{processors}
read_data s.data
pair_style mace/flash
pair_coeff * * {model} {elements}
# a list build every second step (skin 0.5 A): steps with and without a rebuild, atoms migrating
# between the two thin subdomains on 2 ranks
neighbor 0.5 bin
neigh_modify every 2 delay 0 check no
timestep 0.001
# loop geom: velocities depend on coordinates only, not on which rank owns an atom
velocity all create 1200.0 4928459 mom yes rot no dist gaussian loop geom
# plus a drift along -x: atoms a few tenths of an A right of a rank boundary (x = 0 or lx/2) cross it
velocity all set -8.0 0.0 0.0 sum yes
fix nve all nve
thermo_style custom step pe ke etotal press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
thermo 1
compute proc all property/atom proc
dump p all custom 1 procs.dump id c_proc
dump_modify p sort id
run 20
write_dump all custom final.dump id xu yu zu vx vy vz fx fy fz modify sort id format float %.17g
"""


def structure(box):
    numbers, frac, cell = BOXES[box]
    cell = np.array(cell)
    return np.array(numbers), np.array(frac) @ cell, cell


def processors(nprocs):
    return "processors 2 1 1" if nprocs == 2 else ""


def setup_run(workdir, box):
    numbers, pos, cell = structure(box)
    elements = write_data(workdir / "s.data", numbers, pos, cell)
    return dict(model=os.path.join(MODELS, f"{MODEL}.safetensors"), elements=" ".join(elements))


def lammps_step0(workdir, box, nprocs, style=""):
    """Energy, per-atom energies, forces, virial (eV) and per-atom virials, and LAMMPS's output."""
    workdir.mkdir()
    deck = STEP0_DECK.format(processors=processors(nprocs), style=style, **setup_run(workdir, box))
    out = run_lammps(workdir, deck, nprocs)
    r = step0_results(workdir, out)
    assert len(r["ids"]) == len(BOXES[box][0])
    np.testing.assert_array_equal(r.pop("ids"), np.arange(1, len(BOXES[box][0]) + 1))
    return r


_eval = {}


def eval_reference(tmp_path_factory, box):
    """flashmace-eval --path reference --dtype float64 on the periodic structure (computed once)."""
    if box not in _eval:
        numbers, pos, cell = structure(box)
        xyz = tmp_path_factory.mktemp(f"eval_{box}") / "s.xyz"
        write_extxyz(xyz, numbers, pos, cell)
        proc = subprocess.run([EVAL, "--model", os.path.join(MODELS, f"{MODEL}.safetensors"), "--xyz", str(xyz),
                               "--dtype", "float64", "--path", "reference"], capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout)
        volume = abs(np.linalg.det(cell))
        _eval[box] = {"energy": r["energy"], "node_energy": np.array(r["node_energy"]),
                      "forces": np.array(r["forces"]),
                      "virial": -np.array(r["stress"]) * volume}  # MACE: stress = -virial / volume
        ref = _eval[box]
        print(f"{box} eval: energy {ref['energy']:.6f} eV, max |F| {np.max(np.abs(ref['forces'])):.3f} eV/A, "
              f"max |virial| {np.max(np.abs(ref['virial'])):.3f} eV")
        # a non-trivial structure: forces and virial far above the tolerances
        assert np.max(np.abs(ref["forces"])) > 1e6 * TOL64 and np.max(np.abs(ref["virial"])) > 1e6 * TOL64
    return _eval[box]


def differences(lmp, ref):
    d = {k: float(np.max(np.abs(np.asarray(lmp[k]) - np.asarray(ref[k])))) for k in ref}
    d["energy_rel"] = abs(lmp["energy"] - ref["energy"]) / abs(ref["energy"])
    return d


def assert_agree(lmp, ref, what):
    d = differences(lmp, ref)
    print(f"{what}: max |LAMMPS - eval| = " + ", ".join(f"{k} {v:.2e}" for k, v in d.items()))
    assert d["energy_rel"] <= ENERGY_RTOL, (what, lmp["energy"], ref["energy"])
    np.testing.assert_allclose(lmp["node_energy"], ref["node_energy"], rtol=0, atol=TOL64, err_msg=what)
    np.testing.assert_allclose(lmp["forces"], ref["forces"], rtol=0, atol=TOL64, err_msg=what)
    np.testing.assert_allclose(lmp["virial"], ref["virial"], rtol=0, atol=TOL64, err_msg=what)
    # per-atom energies and virials (compute pe/atom, stress/atom) add up to the totals
    assert abs(lmp["sum_pe"] - lmp["energy"]) <= ENERGY_RTOL * abs(lmp["energy"]), what
    np.testing.assert_allclose(lmp["atom_virial_sum"], lmp["virial"], rtol=0, atol=TOL64, err_msg=what)


@pytest.mark.parametrize("box", list(BOXES))
def test_boxes_are_smaller_than_the_cutoff(box):
    """The structures are what this file claims: every plane spacing under r_max, many images of
    each atom (itself included) within r_max, and no two atoms (or images) closer than 2 A."""
    numbers, pos, cell = structure(box)
    volume = abs(np.linalg.det(cell))
    spacings = [volume / np.linalg.norm(np.cross(cell[(d + 1) % 3], cell[(d + 2) % 3])) for d in range(3)]
    assert max(spacings) < R_MAX, spacings
    # restricted triclinic: lower-triangular cell, tilts within LAMMPS's limits
    assert cell[0, 1] == cell[0, 2] == cell[1, 2] == 0
    assert abs(cell[1, 0]) <= cell[0, 0] / 2 and abs(cell[2, 0]) <= cell[0, 0] / 2 and abs(cell[2, 1]) <= cell[1, 1] / 2
    n = len(numbers)
    shifts = np.array(list(itertools.product(range(-4, 5), repeat=3))) @ cell
    closest, self_images, neighbours = np.inf, [], []
    for i in range(n):
        own, all_ = 0, 0
        for j in range(n):
            r = np.linalg.norm(pos[j] + shifts - pos[i], axis=1)
            r = r[r > 0] if i == j else r
            closest = min(closest, r.min())
            all_ += int(np.sum(r < R_MAX))
            own += int(np.sum(r < R_MAX)) if i == j else 0
        self_images.append(own)
        neighbours.append(all_)
    print(f"{box}: plane spacings {np.round(spacings, 3)}, closest pair {closest:.3f} A, neighbours within "
          f"r_max per atom {neighbours}, of which images of itself {self_images}")
    assert closest >= 2.0
    assert min(self_images) >= 6 and min(neighbours) >= 6 * n


@pytest.mark.parametrize("box", list(BOXES))
@pytest.mark.parametrize("style", ["path fast", "path reference", "exchange off"])
def test_serial_folded_equals_eval(tmp_path, tmp_path_factory, box, style):
    # One rank: every ghost is folded into its owner, so no halo exchange is made (no report) and
    # switching it off changes nothing.
    lmp = lammps_step0(tmp_path / "np1", box, 1, style)
    assert "mace/flash halo exchange" not in lmp["output"]
    assert_agree(lmp, eval_reference(tmp_path_factory, box), f"{box} {style} on 1 rank vs eval")


@pytest.mark.parametrize("box", list(BOXES))
@pytest.mark.parametrize("style", ["path fast", "path reference"])
def test_mpi_ghost_rows_equal_eval(tmp_path, tmp_path_factory, box, style):
    # Two ranks: ghosts are graph rows, refreshed by the per-layer exchange (its report is printed).
    lmp = lammps_step0(tmp_path / "np2", box, 2, style)
    assert "mace/flash halo exchange" in lmp["output"]
    nlocal_min = float(re.search(r"^Nlocal:\s+\S+ ave\s+\S+ max\s+(\S+) min", lmp["output"], re.M)[1])
    assert nlocal_min >= 1, "a rank owns no atom: the box did not split across the ranks"
    assert_agree(lmp, eval_reference(tmp_path_factory, box), f"{box} {style} on 2 ranks vs eval")
    # per-atom virials: ghost shares return home by LAMMPS's reverse communication on 2 ranks, folded
    # into their owners on 1
    serial = lammps_step0(tmp_path / "np1", box, 1, style)
    d = float(np.max(np.abs(lmp["atom_virial"] - serial["atom_virial"])))
    print(f"{box} {style}: max |per-atom virial 2 ranks - 1 rank| = {d:.2e} eV")
    np.testing.assert_allclose(lmp["atom_virial"], serial["atom_virial"], rtol=0, atol=TOL64)


@pytest.mark.parametrize("box", ["ortho4", "tri3"])
def test_mpi_without_exchange_is_wrong(tmp_path, tmp_path_factory, box):
    # Negative control: on 2 ranks the ghost rows' features go stale without the exchange, and the
    # comparison above sees it (far outside the tolerances).
    lmp = lammps_step0(tmp_path / "np2", box, 2, "exchange off")
    d = differences(lmp, eval_reference(tmp_path_factory, box))
    print(f"{box} exchange off on 2 ranks vs eval: " + ", ".join(f"{k} {v:.2e}" for k, v in d.items()))
    assert d["energy_rel"] > 1e3 * ENERGY_RTOL and d["forces"] > 1e3 * TOL64


def nve(workdir, box, nprocs):
    workdir.mkdir()
    deck = NVE_DECK.format(processors=processors(nprocs), **setup_run(workdir, box))
    out = run_lammps(workdir, deck, nprocs)
    assert ("mace/flash halo exchange" in out) == (nprocs > 1)
    final = np.loadtxt(workdir / "final.dump", skiprows=9, ndmin=2)
    return thermo_rows(out), final, owners(workdir / "procs.dump")


def owners(path):
    """The rank owning each atom (in ID order) at every step: one row per step."""
    frames, lines = [], path.read_text().splitlines()
    for k, line in enumerate(lines):
        if line.startswith("ITEM: NUMBER OF ATOMS"):
            n = int(lines[k + 1])
        elif line.startswith("ITEM: ATOMS"):
            frames.append([int(row.split()[1]) for row in lines[k + 1:k + 1 + n]])
    return np.array(frames)


@pytest.mark.parametrize("box", list(BOXES))
def test_mpi_nve_trajectory_matches_one_rank(tmp_path, box):
    rows1, final1, _ = nve(tmp_path / "np1", box, 1)
    rows2, final2, owner = nve(tmp_path / "np2", box, 2)
    migrations = int(np.sum(owner[1:] != owner[:-1]))
    print(f"{box} owners on 2 ranks per step: " + " ".join("".join(map(str, o)) for o in owner)
          + f" ({migrations} migrations)")
    # both ranks own atoms at the start, and atoms move between them during the run
    assert set(owner[0]) == {0, 1} and migrations >= 1, owner
    assert rows1.shape == rows2.shape == (21, 11)
    np.testing.assert_array_equal(rows2[:, 0], rows1[:, 0])
    np.testing.assert_array_equal(final2[:, 0], final1[:, 0])
    # energies relative to themselves; pressures, positions, velocities, forces relative to the
    # largest of their kind
    rel = {"pe ke etotal": np.max(np.abs(rows2[:, 1:4] - rows1[:, 1:4]) / np.abs(rows1[:, 1:4]))}
    for name, a, b in (("pressure", rows2[:, 4:11], rows1[:, 4:11]), ("positions", final2[:, 1:4], final1[:, 1:4]),
                       ("velocities", final2[:, 4:7], final1[:, 4:7]), ("forces", final2[:, 7:10], final1[:, 7:10])):
        rel[name] = np.max(np.abs(a - b)) / np.max(np.abs(b))
    drift = np.max(np.abs(rows1[:, 3] - rows1[0, 3]))
    print(f"{box} NVE 20 steps, 2 ranks vs 1 (relative): " + ", ".join(f"{k} {v:.2e}" for k, v in rel.items())
          + f"; 1-rank |etotal - etotal(0)| max {drift:.2e} eV")
    for name, value in rel.items():
        assert value <= TRAJECTORY_RTOL, (box, name, value)
