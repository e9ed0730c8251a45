"""Decks that look wrong but are valid give the right numbers, serially and on 2 ranks:
  * a box thinner than the cutoff in a non-periodic direction (boundary p p f, 3 A against r_max
    4.5 A; the periodic sides, 3.6 A, are shorter than r_max too): energy, forces and virial equal
    the reference path's (flashmace-eval) on the same structure with pbc="T T F". Slab stress:
    flashmace-eval, like MACE, divides the virial by the cell's volume (vacuum included), LAMMPS by
    its box's; the virial they both divide is the same, so it is what is compared;
  * pair_style and pair_coeff re-issued between runs with another model (8 -> 16 channels, so the
    ghost exchange widens): the thermo equals a fresh run with that model."""
import json
import os
import subprocess

import numpy as np
import pytest
from lammps_harness import CUNI_DATA, NKTV2P, TINY, run_lammps, thermo_rows, write_extxyz

EVAL = os.environ.get("FLASHMACE_EVAL", "")
SMALL_L1 = os.path.join(os.environ.get("FLASHMACE_EXPORTED_MODEL_DIR", ""), "small_l1.safetensors")  # Ni Cu
NPROCS = [pytest.param(1, id="np1"), pytest.param(2, id="np2")]
# float64, the same model on the same edges, summed in another order: round-off only (~1e-13).
TOL64 = 1e-10

# Two fcc(001) layers, Cu and Ni, 3.6 A square cell, displaced off the lattice so that every force
# component is non-zero; z is non-periodic (0 to 3 A).
SLAB_CELL = np.diag([3.6, 3.6, 3.0])
SLAB_NUMBERS = np.array([29, 28, 28, 29])
SLAB_POSITIONS = np.array([[0.3, 0.3, 0.6], [2.1, 2.1, 0.6], [2.1, 0.3, 2.4], [0.3, 2.1, 2.4]]) + \
    np.random.default_rng(7).uniform(-0.15, 0.15, (4, 3))  # inside the box: create_atoms drops the rest

SLAB_DECK = f"""units metal
atom_style atomic
atom_modify map array
boundary p p f
region box block 0 3.6 0 3.6 0 3.0
create_box 2 box
mass 1 63.546
mass 2 58.6934
{{atoms}}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
dump d all custom 1 atoms.dump id fx fy fz
dump_modify d sort id format float %.17g
compute vir all pressure NULL virial
thermo_style custom step pe vol c_vir[1] c_vir[2] c_vir[3] c_vir[4] c_vir[5] c_vir[6]
thermo_modify format float %.17g
run 0
"""


@pytest.mark.parametrize("nprocs", NPROCS)
def test_box_thinner_than_the_cutoff_in_a_non_periodic_direction(tmp_path, nprocs):
    atoms = "\n".join(f"create_atoms {1 if z == 29 else 2} single {float(x)!r} {float(y)!r} {float(w)!r} units box"
                      for z, (x, y, w) in zip(SLAB_NUMBERS, SLAB_POSITIONS))
    out = run_lammps(tmp_path, SLAB_DECK.format(atoms=atoms), nprocs)
    assert "with 4 atoms" in out
    row = thermo_rows(out)[0]
    energy, volume = row[1], row[2]
    xx, yy, zz, xy, xz, yz = row[3:9] * volume / NKTV2P  # LAMMPS's pressure back to the virial (eV)
    virial = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    forces = np.loadtxt(tmp_path / "atoms.dump", skiprows=9)[:, 1:4]
    write_extxyz(tmp_path / "slab.xyz", SLAB_NUMBERS, SLAB_POSITIONS, SLAB_CELL, pbc="T T F")
    proc = subprocess.run([EVAL, "--model", TINY, "--xyz", str(tmp_path / "slab.xyz"), "--path", "reference"],
                          capture_output=True, text=True, check=True)
    reference = json.loads(proc.stdout)
    assert abs(energy - reference["energy"]) < TOL64 * max(1.0, abs(energy))
    np.testing.assert_allclose(forces, reference["forces"], rtol=0, atol=TOL64)
    # flashmace-eval's stress is -virial / |det cell|, as MACE's
    reference_virial = -np.array(reference["stress"]) * abs(np.linalg.det(SLAB_CELL))
    np.testing.assert_allclose(virial, reference_virial, rtol=0, atol=TOL64)
    assert np.abs(np.diag(virial)).min() > 1e-3
    assert np.abs(forces).min() > 1e-3  # the structure is not symmetric enough to cancel forces


SWITCH_DECK = f"""units metal
atom_style atomic
atom_modify map array
read_data {CUNI_DATA}
thermo_style custom step pe etotal press pxx pxy
thermo_modify format float %.17g
{{first}}
pair_style mace/flash
pair_coeff * * {SMALL_L1} Cu Ni
velocity all create 600.0 4928459 loop geom
fix nve all nve
thermo 5
run 10
"""


@pytest.mark.parametrize("nprocs", NPROCS)
def test_model_switched_between_runs_equals_a_fresh_run(tmp_path, nprocs):
    (tmp_path / "switched").mkdir()
    (tmp_path / "fresh").mkdir()
    first = f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni\nrun 0"
    switched = thermo_rows(run_lammps(tmp_path / "switched", SWITCH_DECK.format(first=first), nprocs))
    fresh = thermo_rows(run_lammps(tmp_path / "fresh", SWITCH_DECK.format(first=""), nprocs))
    assert len(switched) == len(fresh) + 1  # the first model's run 0, then the same 3 rows
    assert abs(switched[0][1] - fresh[0][1]) > 1.0  # the first model's energy is another one
    np.testing.assert_allclose(switched[1:], fresh, rtol=TOL64, atol=TOL64)
