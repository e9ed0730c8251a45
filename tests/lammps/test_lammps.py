"""pair_style mace/flash in LAMMPS (flashmace-lmp, Debian's LAMMPS library): the same numbers as
official MACE, independent of the MPI rank count, energy-conserving, stable against stored logs,
and clear about user errors."""
import os
import shutil
import subprocess

import numpy as np
import pytest
from export_mace import read_safetensors

LMP = os.environ["FLASHMACE_LMP"]
REF_DIR = os.environ["FLASHMACE_REFERENCE_DIR"]
MODELS = os.environ["FLASHMACE_EXPORTED_MODEL_DIR"]
SOURCE = os.environ["FLASHMACE_SOURCE_DIR"]
EXAMPLES = os.path.join(SOURCE, "examples", "lammps")
TINY = os.path.join(SOURCE, "potentials", "testing", "tiny-cuni-random.safetensors")
NKTV2P = 1.6021765e6  # LAMMPS metal units: pressure (bar) = virial (eV) / volume (A^3) * NKTV2P
SYMBOLS = {14: ("Si", 28.0855), 28: ("Ni", 58.6934), 29: ("Cu", 63.546), 1: ("H", 1.008), 6: ("C", 12.011),
           8: ("O", 15.999)}
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def run_lammps(tmp_path, deck, np_=1, check=True):
    (tmp_path / "in.deck").write_text(deck)
    cmd = ([*MPIRUN, str(np_)] if np_ > 1 else []) + [LMP, "-in", "in.deck", "-log", "none", "-echo", "none"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def thermo_rows(output):
    """Numeric rows of every thermo block, as arrays."""
    rows, in_block = [], False
    for line in output.splitlines():
        if line.strip().startswith("Step"):
            in_block = True
            continue
        if in_block:
            parts = line.split()
            try:
                rows.append([float(p) for p in parts])
            except ValueError:
                in_block = False
    return np.array(rows)


def lower_triangular(cell):
    """Rotation Q with cell @ Q lower-triangular and a positive diagonal (LAMMPS's box)."""
    q, r = np.linalg.qr(cell.T)
    signs = np.sign(np.diag(r))
    return q * signs


def write_data(path, numbers, positions, cell):
    kinds = sorted(set(int(z) for z in numbers))
    h = cell
    frac = np.linalg.solve(h.T, positions.T).T % 1.0
    pos = frac @ h
    h = [[float(v) for v in row] for row in h]  # plain floats: repr() gives all 17 digits
    lines = ["flashmace test structure", "", f"{len(numbers)} atoms", f"{len(kinds)} atom types", "",
             f"0 {h[0][0]!r} xlo xhi", f"0 {h[1][1]!r} ylo yhi", f"0 {h[2][2]!r} zlo zhi",
             f"{h[1][0]!r} {h[2][0]!r} {h[2][1]!r} xy xz yz", "", "Masses", ""]
    lines += [f"{t + 1} {SYMBOLS[z][1]}" for t, z in enumerate(kinds)]
    lines += ["", "Atoms # atomic", ""]
    lines += [f"{i + 1} {kinds.index(int(z)) + 1} {float(p[0])!r} {float(p[1])!r} {float(p[2])!r}"
              for i, (z, p) in enumerate(zip(numbers, pos))]
    path.write_text("\n".join(lines) + "\n")
    return [SYMBOLS[z][0] for z in kinds]


@pytest.mark.parametrize("case", ["small_l1", "scalar_l0", "large_l2"])
def test_energy_forces_virial_equal_official_mace(tmp_path, case):
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    cell, pos = t["bulk.input.cell"], t["bulk.input.positions"]
    q = lower_triangular(cell)
    elements = write_data(tmp_path / "s.data", t["bulk.input.atomic_numbers"], pos @ q, cell @ q)
    deck = f"""units metal
atom_style atomic
atom_modify map array
newton on
read_data s.data
pair_style mace/flash
pair_coeff * * {MODELS}/{case}.safetensors {' '.join(elements)}
compute pe all pe/atom
compute p all pressure NULL virial
dump d all custom 1 out.dump id fx fy fz c_pe
dump_modify d sort id format float %.17g
thermo_style custom step pe c_p[1] c_p[2] c_p[3] c_p[4] c_p[5] c_p[6] vol
thermo_modify format float %.17g
run 0
"""
    _, energy, pxx, pyy, pzz, pxy, pxz, pyz, vol = thermo_rows(run_lammps(tmp_path, deck))[0]
    e_ref = t["bulk.output.energy"][0]
    assert abs(energy - e_ref) <= 1e-10 * abs(e_ref)

    dump = np.loadtxt(tmp_path / "out.dump", skiprows=9)
    forces = dump[:, 1:4] @ q.T  # rotate back into the reference frame
    np.testing.assert_allclose(forces, t["bulk.output.forces"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(dump[:, 4], t["bulk.output.node_energy"], rtol=0, atol=1e-10)

    pressure = np.array([[pxx, pxy, pxz], [pxy, pyy, pyz], [pxz, pyz, pzz]])
    virial = q @ (pressure * vol / NKTV2P) @ q.T
    # MACE's stress is -virial / V (mace_spec.md 10.3)
    np.testing.assert_allclose(-virial / abs(np.linalg.det(cell)), t["bulk.output.stress"], rtol=0, atol=1e-10)


MD_DECK = """units metal
atom_style atomic
atom_modify map array
newton on
read_data {data}
pair_style mace/flash exchange {exchange}
pair_coeff * * {model} Cu Ni
neighbor 1.0 bin
timestep 0.001
velocity all create 800.0 4928459 mom yes rot yes dist gaussian loop geom
fix nve all nve
thermo_style custom step pe ke etotal press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
thermo {every}
run {steps}
"""


def md(tmp_path, np_, steps, exchange="on", every=10):
    deck = MD_DECK.format(data=os.path.join(EXAMPLES, "cuni_fcc108.data"), model=TINY, exchange=exchange,
                          steps=steps, every=every)
    return thermo_rows(run_lammps(tmp_path, deck, np_))


def test_rank_counts_agree_and_the_exchange_matters(tmp_path):
    one = md(tmp_path, 1, 100)
    for np_ in (2, 4):
        other = md(tmp_path, np_, 100)
        np.testing.assert_allclose(other[0], one[0], rtol=1e-10, atol=0, err_msg=f"step 0, {np_} ranks")
        np.testing.assert_allclose(other, one, rtol=1e-8, atol=1e-8, err_msg=f"100 steps, {np_} ranks")
    # Negative control: with stale ghost features (exchange off) step 0 already differs, on one
    # rank too, since periodic images are ghosts: by more than 1e-5 eV, hundreds of times the
    # ~4e-8 eV (1e-10 relative) to which the rank counts agree.
    for np_ in (1, 2):
        stale = md(tmp_path, np_, 0, exchange="off")
        assert abs(stale[0][1] - one[0][1]) > 1e-5, np_


def test_nve_conserves_energy(tmp_path):
    rows = md(tmp_path, 1, 1000, every=20)
    etotal = rows[:, 3]
    drift = np.abs(etotal - etotal[0]).max() / 108
    # Velocity Verlet at 1 fs with these forces (|F| ~ 0.05 eV/A, 800 K) conserves the shadow energy:
    # measured excursions ~1e-7 eV/atom; a sign or scaling error in forces or virial gives > 1e-3.
    assert drift < 1e-5, drift
    slope = np.polyfit(rows[:, 0], etotal, 1)[0] * 1000 / 108
    assert abs(slope) < 1e-5, slope  # eV/atom per 1000 steps: no systematic drift


@pytest.mark.parametrize("deck, log", [("in.md", "md.log"), ("in.min", "min.log")])
def test_examples_match_stored_logs(tmp_path, deck, log):
    for name in ("cuni_fcc108.data", deck):
        shutil.copy(os.path.join(EXAMPLES, name), tmp_path)
    text = (tmp_path / deck).read_text().replace("../../potentials/testing/tiny-cuni-random.safetensors", TINY)
    (tmp_path / deck).write_text(text)
    rows = thermo_rows(run_lammps(tmp_path, text))
    stored = thermo_rows(open(os.path.join(EXAMPLES, "reference", log)).read())
    assert rows.shape == stored.shape
    # Thermo prints 10 significant digits; MD amplifies last-bit differences between BLAS builds a
    # little over 400 steps, so 1e-7 relative is the tolerance (any physics change is far above).
    np.testing.assert_allclose(rows, stored, rtol=1e-7, atol=1e-6)


ERROR_DECK = """units metal
atom_style atomic
atom_modify map array
newton {newton}
read_data {data}
{pair}
run 0
"""


@pytest.mark.parametrize("newton, pair, message", [
    ("on", "pair_style mace/flash", "All pair coeffs are not set"),
    ("on", "pair_style mace/flash\npair_coeff * * {model} Cu O", "element O (type 2) is not in the model"),
    ("on", "pair_style mace/flash\npair_coeff * * {model} Cu", "one element per atom type (2 types, got 1 elements)"),
    ("on", "pair_style mace/flash\npair_coeff * * {model} Cu NULL", "does not allow NULL"),
    ("off", "pair_style mace/flash\npair_coeff * * {model} Cu Ni", "Pair style mace/flash requires newton pair on"),
    ("on", "pair_style mace/flash\npair_coeff * * /nonexistent/model.safetensors Cu Ni", "Cannot open model file"),
    ("on", "pair_style mace/flash device tpu", "Illegal pair_style mace/flash device tpu"),
])
def test_user_errors_are_explained(tmp_path, newton, pair, message):
    deck = ERROR_DECK.format(newton=newton, data=os.path.join(EXAMPLES, "cuni_fcc108.data"),
                             pair=pair.format(model=TINY))
    out = run_lammps(tmp_path, deck, check=False)
    assert "ERROR" in out and message in out, out[-2000:]


def test_overlapping_atoms_are_reported(tmp_path):
    data = open(os.path.join(EXAMPLES, "cuni_fcc108.data")).read().splitlines()
    atoms = data.index("Atoms # atomic") + 2
    first = data[atoms].split()
    second = data[atoms + 1].split()
    data[atoms + 1] = " ".join(second[:2] + [str(float(first[2]) + 0.05)] + first[3:5])
    (tmp_path / "bad.data").write_text("\n".join(data) + "\n")
    deck = ERROR_DECK.format(newton="on", data="bad.data", pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni")
    out = run_lammps(tmp_path, deck, check=False)
    assert "atoms 1 and 2" in out and "closer than 0.1 A" in out, out[-2000:]
