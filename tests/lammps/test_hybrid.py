"""mace/flash beside other pair styles, serially and on 2 ranks:
  * pair_style hybrid/overlay mace/flash with zbl or lj/cut, and hybrid/scaled (1.0 mace/flash,
    0.5 zbl): energy, per-atom energies, forces, virial and per-atom virials equal the (weighted)
    sums of separate runs of each style (float64, 1e-12 relative: the same numbers added in another
    order);
  * its NVE drift is of the order of its parts' (the sum of two conservative forces);
  * a molecular system (atom_style bond, over 100 bonds) with special_bonds lj/coul 1 1 1 gives the
    energy and forces of the same atoms without bonds (the check in init_style stops the run for
    weights of 0, test_errors.py)."""
import re

import numpy as np
import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps, thermo_rows

NPROCS = [pytest.param(1, id="np1"), pytest.param(2, id="np2")]
TOL = 1e-12

OTHER = {
    "zbl": "pair_style zbl 2.0 3.0\npair_coeff 1 1 29 29\npair_coeff 1 2 29 28\npair_coeff 2 2 28 28",
    "lj": "pair_style lj/cut 5.0\npair_coeff * * 0.01 2.3",
}
OVERLAY = {
    "zbl": f"pair_style hybrid/overlay mace/flash zbl 2.0 3.0\npair_coeff * * mace/flash {TINY} Cu Ni\n"
           "pair_coeff 1 1 zbl 29 29\npair_coeff 1 2 zbl 29 28\npair_coeff 2 2 zbl 28 28",
    "lj": f"pair_style hybrid/overlay mace/flash lj/cut 5.0\npair_coeff * * mace/flash {TINY} Cu Ni\n"
          "pair_coeff * * lj/cut 0.01 2.3",
    # hybrid/scaled: MACE as it is plus half of zbl
    "scaled": f"pair_style hybrid/scaled 1.0 mace/flash 0.5 zbl 2.0 3.0\npair_coeff * * mace/flash {TINY} Cu Ni\n"
              "pair_coeff 1 1 zbl 29 29\npair_coeff 1 2 zbl 29 28\npair_coeff 2 2 zbl 28 28",
}
OTHER["scaled"] = OTHER["zbl"]
WEIGHT = {"zbl": 1.0, "lj": 1.0, "scaled": 0.5}
MACE = f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni"

POINT = f"""units metal
atom_style atomic
atom_modify map array
read_data {CUNI_DATA}
displace_atoms all random 0.05 0.05 0.05 4821
{{pair}}
compute pe all pe/atom
compute sa all stress/atom NULL
thermo_style custom step pe press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
dump d all custom 1 atoms.dump id fx fy fz c_pe c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
dump_modify d sort id format float %.17g
run 0
"""

NVE = f"""units metal
atom_style atomic
atom_modify map array
read_data {CUNI_DATA}
{{pair}}
velocity all create 600.0 4928459 loop geom
fix nve all nve
timestep 0.001
thermo 10
thermo_style custom step etotal
thermo_modify format float %.17g
run 200
"""


def point(tmp_path, name, pair, nprocs):
    work = tmp_path / name
    work.mkdir()
    thermo = thermo_rows(run_lammps(work, POINT.format(pair=pair), nprocs))[0]
    dump = np.loadtxt(work / "atoms.dump", skiprows=9)
    return thermo[1:], dump[:, 1:]  # pe and pressure tensor; forces, pe/atom, stress/atom


@pytest.mark.parametrize("nprocs", NPROCS)
@pytest.mark.parametrize("other", ["zbl", "lj", "scaled"])
def test_overlay_is_the_sum_of_its_parts(tmp_path, other, nprocs):
    mace = point(tmp_path, "mace", MACE, nprocs)
    part = point(tmp_path, "other", OTHER[other], nprocs)
    both = point(tmp_path, "overlay", OVERLAY[other], nprocs)
    assert np.abs(part[0][0]) > 1e-3 and np.abs(part[1][:, :3]).max() > 1e-3  # the other style acts here
    for got, a, b, what in [(both[0], mace[0], part[0], "pe, pressure"), (both[1], mace[1], part[1], "per atom")]:
        want = a + WEIGHT[other] * b
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= TOL * scale, (other, what, np.abs(got - want).max() / scale)


def drift(output):
    etotal = thermo_rows(output)[:, 1]
    return np.abs(etotal - etotal[0]).max()


@pytest.mark.parametrize("nprocs", NPROCS)
def test_overlay_conserves_energy_like_its_parts(tmp_path, nprocs):
    drifts = {}
    for name, pair in (("mace", MACE), ("zbl", OTHER["zbl"]), ("overlay", OVERLAY["zbl"])):
        (tmp_path / name).mkdir()
        drifts[name] = drift(run_lammps(tmp_path / name, NVE.format(pair=pair), nprocs))
    # 108 atoms at 600 K over 200 steps of 1 fs: each drifts by integration error only (zbl's steep
    # wall most); the overlay's forces are the sum, so its drift stays of the order of the parts'.
    assert drifts["overlay"] <= 2 * (drifts["mace"] + drifts["zbl"]) + 1e-5, drifts


MOLECULAR = f"""units metal
atom_style {{style}}
atom_modify map array
lattice fcc 3.61
region box block 0 2 0 2 0 2
create_box 2 box {{box}}
create_atoms 1 box
set type 1 type/fraction 2 0.5 4
displace_atoms all random 0.05 0.05 0.05 4821
mass * 60.0
{{bonds}}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
thermo_style custom step pe press
thermo_modify format float %.17g
dump d all custom 1 atoms.dump id fx fy fz
dump_modify d sort id format float %.17g
run 0
"""
BONDS = """bond_style zero
bond_coeff 1 2.55
pair_style zero 3.0
pair_coeff * *
create_bonds many all all 1 2.4 2.7
special_bonds lj/coul 1.0 1.0 1.0"""


@pytest.mark.parametrize("nprocs", NPROCS)
def test_bonded_atoms_with_unit_special_weights_equal_the_atomic_system(tmp_path, nprocs):
    results = []
    for name, style, box, bonds in [("atomic", "atomic", "", ""),
                                    ("bonded", "bond", "bond/types 1 extra/bond/per/atom 12 "
                                     "extra/special/per/atom 200", BONDS)]:
        work = tmp_path / name
        work.mkdir()
        out = run_lammps(work, MOLECULAR.format(style=style, box=box, bonds=bonds), nprocs)
        if name == "bonded":  # (displaced atoms: most of the 192 nearest-neighbour pairs in 2.4-2.7 A)
            bonds = re.search(r"Added (\d+) bonds", out)
            assert bonds and int(bonds.group(1)) >= 100, out[-2000:]
        results.append((thermo_rows(out)[0], np.loadtxt(work / "atoms.dump", skiprows=9)))
    (atomic_thermo, atomic_dump), (bonded_thermo, bonded_dump) = results
    np.testing.assert_allclose(bonded_thermo, atomic_thermo, rtol=TOL, atol=0)
    np.testing.assert_allclose(bonded_dump, atomic_dump, rtol=0, atol=TOL * np.abs(atomic_dump).max())
