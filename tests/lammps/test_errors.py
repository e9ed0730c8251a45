"""User errors stop LAMMPS with a message that says what is wrong (checked word for word)."""
import shutil
import subprocess

import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps

DECK = """units {units}
atom_style atomic
atom_modify map array
newton {newton}
read_data {data}
{pair}
{extra}
run {steps}
"""
PAIR = f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni"


def lammps_error(tmp_path, pair=PAIR, newton="on", units="metal", data=CUNI_DATA, extra="", steps=0):
    out = run_lammps(tmp_path, DECK.format(units=units, newton=newton, data=data, pair=pair, extra=extra, steps=steps),
                     check=False)
    assert "ERROR" in out, out[-3000:]
    return out


@pytest.mark.parametrize("pair, message", [
    ("pair_style mace/flash", "All pair coeffs are not set"),
    (f"pair_style mace/flash\npair_coeff * * {TINY} Cu O",
     f"Pair style mace/flash: element O (atom type 2) is not in the model {TINY}, which has: Ni Cu"),
    (f"pair_style mace/flash\npair_coeff * * {TINY} Cu Xx",
     f"Pair style mace/flash: Xx (atom type 2) is not an element symbol; the model {TINY} has: Ni Cu"),
    (f"pair_style mace/flash\npair_coeff * * {TINY} Cu",
     "pair_coeff * * model.safetensors needs one element per atom type (2 atom types, 1 elements given)"),
    (f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni Ni",
     "pair_coeff * * model.safetensors needs one element per atom type (2 atom types, 3 elements given)"),
    (f"pair_style mace/flash\npair_coeff * * {TINY} Cu NULL",
     "Pair style mace/flash does not allow NULL in pair_coeff: every atom type (here type 2) must map to an element"),
    (f"pair_style mace/flash\npair_coeff 1 2 {TINY} Cu Ni", "Incorrect args for pair coefficients"),  # LAMMPS's
    ("pair_style mace/flash\npair_coeff * * /nonexistent/model.safetensors Cu Ni",
     "Cannot open model file /nonexistent/model.safetensors: no such file or not readable"),
    (f"pair_style mace/flash tf32 yes\npair_coeff * * {TINY} Cu Ni",
     "tf32 needs dtype float32 on a CUDA device (it lets the radial-MLP GEMMs use TF32 tensor cores); "
     "this evaluator is float64 on cpu"),
    (f"pair_style hybrid/overlay mace/flash zero 3.0\npair_coeff * * mace/flash {TINY} Cu Ni\npair_coeff * * zero",
     "Pair style mace/flash cannot be used as a sub-style of pair_style hybrid or hybrid/overlay"),
    ("pair_style mace/flash chunk 4", "Illegal pair_style mace/flash keyword chunk: known are device, dtype, path, edge_chunk, memory, sc, tf32, exchange"),
    ("pair_style mace/flash device tpu", "Illegal pair_style mace/flash device tpu: use cpu, cuda or cuda:N"),
    ("pair_style mace/flash dtype float16", "Illegal pair_style mace/flash dtype float16: use float32 or float64"),
    ("pair_style mace/flash dtype", "Illegal pair_style mace/flash command: dtype needs a value"),
    ("pair_style mace/flash path quick", "Illegal pair_style mace/flash path quick: use fast or reference"),
    ("pair_style mace/flash edge_chunk -5", "Illegal pair_style mace/flash edge_chunk -5"),
    ("pair_style mace/flash memory -1", "Illegal pair_style mace/flash memory -1"),
    ("pair_style mace/flash sc fastest", "Illegal pair_style mace/flash sc fastest: use auto, specialized or generic"),
    ("pair_style mace/flash tf32 on", "Illegal pair_style mace/flash tf32 on: use yes or no"),
])
def test_bad_pair_commands_are_explained(tmp_path, pair, message):
    out = lammps_error(tmp_path, pair=pair)
    assert message in out, out[-3000:]


def test_cuda_without_a_gpu_is_explained(tmp_path):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0:
        pytest.skip("this machine has a GPU")
    out = lammps_error(tmp_path, pair=f"pair_style mace/flash device cuda\npair_coeff * * {TINY} Cu Ni")
    assert "Device 'cuda' requested but this machine has no usable CUDA GPU; use device cpu" in out, out[-3000:]


def test_newton_off_is_refused(tmp_path):
    assert "Pair style mace/flash requires newton pair on" in lammps_error(tmp_path, newton="off")


def test_units_other_than_metal_are_refused(tmp_path):
    assert "Pair style mace/flash requires metal units (eV, Angstrom)" in lammps_error(tmp_path, units="real")


def test_a_damaged_model_file_is_named(tmp_path):
    bad = tmp_path / "damaged.safetensors"
    bad.write_bytes(b"not a model")
    out = lammps_error(tmp_path, pair=f"pair_style mace/flash\npair_coeff * * {bad} Cu Ni")
    assert str(bad) in out and "truncated" in out, out[-3000:]


def test_overlapping_atoms_are_named(tmp_path):
    lines = open(CUNI_DATA).read().splitlines()
    first = lines.index("Atoms # atomic") + 2
    x, y, z = (float(v) for v in lines[first].split()[2:5])
    tag, atom_type = lines[first + 1].split()[:2]
    lines[first + 1] = f"{tag} {atom_type} {x + 0.05} {y} {z}"  # atom 2 onto atom 1
    (tmp_path / "overlap.data").write_text("\n".join(lines) + "\n")
    out = lammps_error(tmp_path, data="overlap.data")
    assert "Pair style mace/flash: atoms 1 and 2 are 0.050000 A apart, closer than 0.1 A" in out, out[-3000:]


def test_non_finite_positions_are_named(tmp_path):
    # LAMMPS itself rejects NaN coordinates when it re-neighbours; between re-neighbourings the
    # pair style must. Atom 5 is moved to NaN (inf - inf) from step 2 on, with no re-neighbouring.
    extra = """neigh_modify every 100 delay 0 check no
group one id 5
variable blowup equal (step>=2)*1e308*10-(step>=2)*1e308*10
fix nve all nve
fix move one move variable v_blowup NULL NULL NULL NULL NULL"""
    out = lammps_error(tmp_path, extra=extra, steps=5)
    assert "Pair style mace/flash: atom 5 has a non-finite position" in out, out[-3000:]
