"""Bad decks: wrong LAMMPS inputs stop LAMMPS, serially and on 2 ranks, with one error message that
names the problem and the fix (checked word for word), in time (no hang) and by an exit of its own
(no signal, no core dump): lammps_harness.run_lammps_error. Messages from LAMMPS itself are marked."""
import os
import shutil
import subprocess

import numpy as np
import pytest
from export_mace import read_safetensors, write_safetensors
from lammps_harness import CUNI_DATA, LMP, MPIRUN, TINY, run_lammps_error

REFERENCE_DIR = os.environ.get("FLASHMACE_REFERENCE_DIR", "")
SCALAR_L0 = os.path.join(os.environ.get("FLASHMACE_EXPORTED_MODEL_DIR", ""), "scalar_l0.safetensors")  # H C O

DECK = """units {units}
{dimension}
atom_style atomic
atom_modify map array
newton {newton}
{box}
{pair}
{extra}
run {steps}
"""
PAIR = f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni"
READ_DATA = f"read_data {CUNI_DATA}"
NPROCS = [pytest.param(1, id="np1"), pytest.param(2, id="np2")]


def bad_files(tmp_path):
    """Damaged inputs in tmp_path: model files (not a model, cut short, a directory) and a data file
    with atom 2 moved onto atom 1."""
    (tmp_path / "damaged.safetensors").write_bytes(b"not a model")
    (tmp_path / "truncated.safetensors").write_bytes(open(TINY, "rb").read()[:3000])
    (tmp_path / "model_dir.safetensors").mkdir()
    lines = open(CUNI_DATA).read().splitlines()
    first = lines.index("Atoms # atomic") + 2
    x, y, z = (float(v) for v in lines[first].split()[2:5])
    tag, atom_type = lines[first + 1].split()[:2]
    lines[first + 1] = f"{tag} {atom_type} {x + 0.05} {y} {z}"
    (tmp_path / "overlap.data").write_text("\n".join(lines) + "\n")
    tensors, metadata = read_safetensors(TINY)
    tensors["interactions.0.linear_up.weight"].flat[3] = float("nan")
    write_safetensors(str(tmp_path / "nan_weight.safetensors"), tensors, metadata)
    # finite weights whose readout overflows: every energy comes out infinite
    tensors, metadata = read_safetensors(TINY)
    tensors["readouts.0.linear.weight"][:] = np.finfo(np.float64).max
    write_safetensors(str(tmp_path / "overflowing.safetensors"), tensors, metadata)


# 32 atoms of fcc Cu-Ni with a bond between every pair of nearest neighbours (192 bonds; 2.4-2.7 A).
MOLECULAR = f"""units metal
atom_style bond
atom_modify map array
lattice fcc 3.61
region box block 0 2 0 2 0 2
create_box 2 box bond/types 1 extra/bond/per/atom 12 extra/special/per/atom 200
create_atoms 1 box
set type 1 type/fraction 2 0.5 4
mass * 60.0
bond_style zero
bond_coeff 1 2.55
pair_style zero 3.0
pair_coeff * *
create_bonds many all all 1 2.4 2.7
{{special}}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
run 0
"""


def deck(pair=PAIR, newton="on", units="metal", dimension="", box=READ_DATA, extra="", steps=0):
    return DECK.format(units=units, dimension=dimension, newton=newton, box=box, pair=pair, extra=extra, steps=steps)


def model(path):
    return f"pair_style mace/flash\npair_coeff * * {path} Cu Ni"


# (id, deck, the message; {tmp} is the test's folder)
BAD_DECKS = [
    ("no_pair_coeff", deck(pair="pair_style mace/flash"), "All pair coeffs are not set"),  # LAMMPS's
    ("element_not_in_model", deck(pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu O"),
     f"Pair style mace/flash: element O (atom type 2) is not in the model {TINY}, which has: Ni Cu"),
    ("not_an_element", deck(pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu Xx"),
     f"Pair style mace/flash: Xx (atom type 2) is not an element symbol; the model {TINY} has: Ni Cu"),
    ("too_few_elements", deck(pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu"),
     "pair_coeff * * model.safetensors needs one element per atom type (2 atom types, 1 elements given)"),
    ("too_many_elements", deck(pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni Ni"),
     "pair_coeff * * model.safetensors needs one element per atom type (2 atom types, 3 elements given)"),
    ("null_element", deck(pair=f"pair_style mace/flash\npair_coeff * * {TINY} Cu NULL"),
     "Pair style mace/flash does not allow NULL in pair_coeff: every atom type (here type 2) must map to an element"),
    ("pair_coeff_not_star_star", deck(pair=f"pair_style mace/flash\npair_coeff 1 2 {TINY} Cu Ni"),
     "Incorrect args for pair coefficients"),  # LAMMPS's
    ("model_missing", deck(pair=model("/nonexistent/model.safetensors")),
     "Cannot open model file /nonexistent/model.safetensors: no such file or not readable"),
    ("model_not_a_model", deck(pair=model("{tmp}/damaged.safetensors")),
     "File {tmp}/damaged.safetensors: truncated: header length"),
    ("model_cut_short", deck(pair=model("{tmp}/truncated.safetensors")),
     "File {tmp}/truncated.safetensors: truncated: header length"),
    ("model_is_a_directory", deck(pair=model("{tmp}/model_dir.safetensors")),
     "Cannot open model file {tmp}/model_dir.safetensors: it is a directory"),
    ("model_not_exported", deck(pair=model(f"{REFERENCE_DIR}/mace_small_l1.safetensors")),
     f"Model file {REFERENCE_DIR}/mace_small_l1.safetensors: no 'flashmace' metadata; this is not a flashmace "
     "model (convert MACE models with tools/export_mace.py)"),
    ("model_reissued_without_the_elements", deck(extra=f"run 0\npair_style mace/flash\npair_coeff * * {SCALAR_L0} Cu Ni"),
     f"Pair style mace/flash: element Cu (atom type 1) is not in the model {SCALAR_L0}, which has: H C O"),
    ("tf32_on_cpu", deck(pair=f"pair_style mace/flash tf32 yes\npair_coeff * * {TINY} Cu Ni"),
     "tf32 yes needs dtype float32 on a CUDA device (it lets the radial-MLP GEMMs use TF32 tensor cores); "
     "this evaluator is float64 on cpu"),
    ("unknown_keyword", deck(pair="pair_style mace/flash chunk 4"),
     "Illegal pair_style mace/flash keyword chunk: known are device, dtype, head, charge, spin, elec_temp, path, edge_chunk, atom_chunk, "
     "memory, sc, tf32, reassociate, radial, radial_intervals, radial_pairs, atom_order, cuda_graph, side_stream, exchange"),
    ("radial_spline_on_the_reference_path", deck(pair=f"pair_style mace/flash path reference radial spline\npair_coeff * * {TINY} Cu Ni"),
     "radial spline is a fast-path mode (the reference path runs the exact radial MLP); use path fast or radial exact"),
    ("bad_radial_intervals", deck(pair="pair_style mace/flash radial_intervals 5"),
     "Illegal pair_style mace/flash radial_intervals 5: use 0 (automatic) or 16 to 4096"),
    ("keyword_without_value", deck(pair="pair_style mace/flash dtype"),
     "Illegal pair_style mace/flash command: dtype needs a value"),
    ("bad_device", deck(pair="pair_style mace/flash device tpu"),
     "Illegal pair_style mace/flash device tpu: use cpu, cuda or cuda:N"),
    ("bad_dtype", deck(pair="pair_style mace/flash dtype float16"),
     "Illegal pair_style mace/flash dtype float16: use float32 or float64"),
    ("bad_path", deck(pair="pair_style mace/flash path quick"), "Illegal pair_style mace/flash path quick: use fast or reference"),
    ("negative_edge_chunk", deck(pair="pair_style mace/flash edge_chunk -5"), "Illegal pair_style mace/flash edge_chunk -5"),
    ("non_numeric_edge_chunk", deck(pair="pair_style mace/flash edge_chunk abc"),
     "Illegal pair_style mace/flash edge_chunk abc: use 0 (automatic) or more"),
    ("bad_device_index", deck(pair="pair_style mace/flash device cuda:abc"),
     "Illegal pair_style mace/flash device cuda:abc: use cpu, cuda or cuda:N"),
    ("negative_memory", deck(pair="pair_style mace/flash memory -1"), "Illegal pair_style mace/flash memory -1"),
    ("bad_sc", deck(pair="pair_style mace/flash sc fastest"),
     "Illegal pair_style mace/flash sc fastest: use auto, specialized or generic"),
    ("bad_tf32", deck(pair="pair_style mace/flash tf32 on"), "Illegal pair_style mace/flash tf32 on: use auto, yes or no"),
    ("newton_off", deck(newton="off"), "Pair style mace/flash requires newton pair on"),
    ("units_real", deck(units="real"), "Pair style mace/flash requires metal units (eV, Angstrom)"),
    ("dimension_2", deck(dimension="dimension 2", box="region box block 0 10 0 10 -0.5 0.5\ncreate_box 2 box\n"
                         "create_atoms 1 single 1 1 0\ncreate_atoms 2 single 3.5 1 0\nmass * 60"),
     "Pair style mace/flash requires a 3d simulation (dimension 3)"),
    ("overlapping_atoms", deck(box="read_data {tmp}/overlap.data"),
     "Pair style mace/flash: atoms 1 and 2 are 0.050000 A apart, closer than 0.1 A: overlapping atoms"),
    # LAMMPS rejects NaN coordinates when it re-neighbours; between re-neighbourings the pair style
    # must. Atom 5 is moved to NaN (inf - inf) from step 2 on, with no re-neighbouring.
    ("nan_position", deck(steps=5, extra="neigh_modify every 100 delay 0 check no\ngroup one id 5\n"
                          "variable blowup equal (step>=2)*1e308*10-(step>=2)*1e308*10\nfix nve all nve\n"
                          "fix move one move variable v_blowup NULL NULL NULL NULL NULL"),
     "Pair style mace/flash: atom 5 has a non-finite position (the simulation has blown up)"),
    ("nan_velocities", deck(steps=5, extra="variable nan equal 1e308*10-1e308*10\nvelocity all set v_nan 0 0\n"
                            "fix nve all nve"),
     "has a non-finite position (the simulation has blown up)"),
    ("neighbor_list_overflow", deck(extra="neigh_modify one 10 page 100"),
     "Neighbor list overflow, boost neigh_modify one"),  # LAMMPS's, for the full list the style requests
    ("centroid_stress", deck(extra="compute s all centroid/stress/atom NULL\ncompute r all reduce sum c_s[1]\n"
                             "thermo_style custom step c_r"),
     "Pair style does not support compute centroid/stress/atom"),  # LAMMPS's (CENTROID_NOTAVAIL)
    ("pair_write", deck(extra="pair_write 1 1 10 r 1.0 4.0 table.txt T"),
     "Pair style does not support pair_write"),  # LAMMPS's (no single())
    # Pairs missing from the neighbour list (issue: silently wrong energies before these checks).
    ("bonded_pairs_excluded", MOLECULAR.format(special=""),
     "Pair style mace/flash needs bonded atoms in its neighbour list, but special_bonds weights of 0 (LAMMPS's "
     "default lj/coul 0.0 0.0 0.0) remove 1-2, 1-3 or 1-4 pairs from it"),
    ("bonded_1_4_pairs_excluded", MOLECULAR.format(special="special_bonds lj/coul 1.0 1.0 0.0"),
     "use special_bonds lj/coul 1.0 1.0 1.0"),
    ("neigh_modify_exclude_type", deck(extra="neigh_modify exclude type 1 2"),
     "Pair style mace/flash cannot be used with neigh_modify exclude: MACE is a many-body potential"),
    ("neigh_modify_exclude_group", deck(extra="group frozen id 1:10\nneigh_modify exclude group frozen frozen"),
     "remove the exclusion (to hold atoms in place, use fix setforce 0.0 0.0 0.0 on their group)"),
    ("stale_list_after_delete_atoms", deck(extra="run 0\ngroup gone id 5\ndelete_atoms group gone\nrun 1 pre no"),
     "atoms were added or deleted since they were built; start the run with pre yes"),
    ("hybrid_gives_a_type_pair_away", deck(pair=f"pair_style hybrid mace/flash zbl 1.0 2.0\n"
                                                f"pair_coeff * * mace/flash {TINY} Cu Ni\npair_coeff 1 1 zbl 29 29"),
     "Pair style mace/flash must see every pair of atom types, but pair_style hybrid gives type pair 1 1 to other "
     "styles only; use pair_style hybrid/overlay"),
    ("non_finite_energy", deck(pair="pair_style mace/flash\npair_coeff * * {tmp}/overflowing.safetensors Cu Ni"),
     "Pair style mace/flash: the model {tmp}/overflowing.safetensors gave a non-finite energy at step 0 although "
     "every position is finite"),
    ("non_finite_model", deck(pair="pair_style mace/flash\npair_coeff * * {tmp}/nan_weight.safetensors Cu Ni"),
     "{tmp}/nan_weight.safetensors: tensor 'interactions.0.linear_up.weight' holds nan at flat index 3"),
]


@pytest.mark.parametrize("nprocs", NPROCS)
@pytest.mark.parametrize("text, message", [pytest.param(t, m, id=i) for i, t, m in BAD_DECKS])
def test_bad_deck_stops_with_one_clear_error(tmp_path, text, message, nprocs):
    bad_files(tmp_path)
    out = run_lammps_error(tmp_path, text.replace("{tmp}", str(tmp_path)), nprocs)
    assert message.replace("{tmp}", str(tmp_path)) in out, out[-3000:]


@pytest.mark.parametrize("nprocs", NPROCS)
def test_cuda_without_a_gpu_is_explained(tmp_path, nprocs):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0:
        pytest.skip("this machine has a GPU")
    out = run_lammps_error(tmp_path, deck(pair=f"pair_style mace/flash device cuda\npair_coeff * * {TINY} Cu Ni"), nprocs)
    assert "Device 'cuda' requested but this machine has no usable CUDA GPU; use device cpu" in out, out[-3000:]


def test_model_missing_on_one_rank_stops_every_rank_np2(tmp_path):
    # A file on node-local disk that one node lacks: each rank reads its own path from its environment.
    # Before the ranks agreed on failures, rank 0 went on while rank 1 waited in error->all: a hang.
    text = deck(pair="variable m getenv FLASHMACE_TEST_MODEL\npair_style mace/flash\npair_coeff * * ${m} Cu Ni")
    rank = ["-in", "in.deck", "-log", "none", "-echo", "none"]
    exe = [MPIRUN[0], *MPIRUN[1:-1], "-np", "1", "-x", f"FLASHMACE_TEST_MODEL={TINY}", LMP, *rank, ":",
           "-np", "1", "-x", "FLASHMACE_TEST_MODEL=/nonexistent/model.safetensors", LMP]
    out = run_lammps_error(tmp_path, text, exe=exe)
    assert ("ERROR: Cannot open model file /nonexistent/model.safetensors: no such file or not readable (it failed on "
            "1 of 2 ranks, first on rank 1: do all ranks see the same file and devices?)") in out, out[-3000:]
