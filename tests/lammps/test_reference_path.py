"""pair_style mace/flash in LAMMPS gives the reference path's numbers (ReferenceModel::evaluate, run by
flashmace-eval) and official MACE's (stored in the shared reference files): energy, per-atom energies,
forces and virial of the shared 32-atom periodic triclinic structures, on 1, 2 and 4 MPI ranks.

The cell is rotated into LAMMPS's lower-triangular frame; forces and the virial are rotated back."""
import json
import os
import subprocess

import numpy as np
import pytest
from export_mace import read_safetensors
from lammps_harness import (MODEL_DECK, STEP0_OUTPUT, lammps_frame, run_lammps, step0_results, write_data, write_extxyz)

REF_DIR = os.environ.get("FLASHMACE_REFERENCE_DIR", "")
MODELS = os.environ.get("FLASHMACE_EXPORTED_MODEL_DIR", "")
EVAL = os.environ.get("FLASHMACE_EVAL", "")
CASES = ["small_l1", "scalar_l0", "large_l2"]

# float64: the same edges and arithmetic as the reference path, summed in another order (LAMMPS's
# neighbour order, ghost atoms instead of shifts, MPI sums): round-off only, ~1e-13 measured.
TOL64 = 1e-10
# float32 (dtype float32 on a float64 file): ~6e-8 relative rounding per operation over a few
# hundred chained operations; measured 2e-7 eV/A on forces, 3e-6 eV (6e-8 relative) on the energy,
# so 1e-5 keeps a 50x margin while a real error (a wrong sign, a missing term) is far larger.
TOL32 = 1e-5

DECK = MODEL_DECK + STEP0_OUTPUT


_serial = {}


@pytest.fixture
def serial_results(tmp_path_factory):
    """Serial LAMMPS results per case, computed once for the module."""
    def get(case):
        if case not in _serial:
            _serial[case] = lammps_results(tmp_path_factory.mktemp(case), case, 1)
        return _serial[case]
    return get


def lammps_results(tmp_path, case, nprocs, style="", exe=None, args=(), preamble=""):
    """Energy, per-atom energies, forces, virial (eV) and per-atom virials, in the reference frame, and
    LAMMPS's output. exe, args: another LAMMPS and its command-line switches; preamble: lines before
    the deck (plugin load)."""
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    cell, pos, numbers = t["bulk.input.cell"], t["bulk.input.positions"], t["bulk.input.atomic_numbers"]
    q = lammps_frame(cell)
    elements = write_data(tmp_path / "s.data", numbers, pos @ q, cell @ q)
    deck = preamble + DECK.format(style=style, model=os.path.join(MODELS, f"{case}.safetensors"),
                                  elements=" ".join(elements))
    out = run_lammps(tmp_path, deck, nprocs, exe=exe, args=args)
    r = step0_results(tmp_path, out, rotate=q)
    del r["ids"]
    r["volume"] = abs(np.linalg.det(cell))
    return r


def reference_path(tmp_path, case, dtype="float64"):
    """flashmace-eval --path reference (the oracle on the periodic structure, no LAMMPS)."""
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    write_extxyz(tmp_path / "s.xyz", t["bulk.input.atomic_numbers"], t["bulk.input.positions"], t["bulk.input.cell"])
    proc = subprocess.run([EVAL, "--model", os.path.join(MODELS, f"{case}.safetensors"), "--xyz",
                           str(tmp_path / "s.xyz"), "--dtype", dtype, "--path", "reference"], capture_output=True, text=True, check=True)
    r = json.loads(proc.stdout)
    volume = abs(np.linalg.det(t["bulk.input.cell"]))
    return {"energy": r["energy"], "node_energy": np.array(r["node_energy"]), "forces": np.array(r["forces"]),
            "virial": -np.array(r["stress"]) * volume}  # MACE: stress = -virial / volume


def official_mace(case):
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    volume = abs(np.linalg.det(t["bulk.input.cell"]))
    return {"energy": t["bulk.output.energy"][0], "node_energy": t["bulk.output.node_energy"],
            "forces": t["bulk.output.forces"], "virial": -t["bulk.output.stress"] * volume}


def assert_agree(lmp, ref, tol, what):
    assert abs(lmp["energy"] - ref["energy"]) <= tol * max(1.0, abs(ref["energy"])), (what, lmp["energy"], ref["energy"])
    np.testing.assert_allclose(lmp["node_energy"], ref["node_energy"], rtol=tol, atol=tol, err_msg=what)
    np.testing.assert_allclose(lmp["forces"], ref["forces"], rtol=0, atol=tol, err_msg=what)
    np.testing.assert_allclose(lmp["virial"], ref["virial"], rtol=tol, atol=tol, err_msg=what)
    diffs = {k: float(np.max(np.abs(np.asarray(lmp[k]) - np.asarray(ref[k])))) for k in ref}
    print(f"{what}: max |LAMMPS - reference| = {diffs}")


@pytest.mark.parametrize("case", CASES)
def test_serial_equals_reference_path_and_official_mace(tmp_path, serial_results, case):
    lmp = serial_results(case)
    assert_agree(lmp, reference_path(tmp_path, case), TOL64, f"{case} vs reference path")
    assert_agree(lmp, official_mace(case), TOL64, f"{case} vs official MACE")
    # Per-atom energies and virials (compute pe/atom, stress/atom) add up to the totals.
    assert abs(lmp["sum_pe"] - lmp["energy"]) <= TOL64 * abs(lmp["energy"])
    np.testing.assert_allclose(lmp["atom_virial_sum"], lmp["virial"], rtol=TOL64, atol=TOL64)


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("case", ["small_l1", "large_l2"])
def test_mpi_equals_reference_path(tmp_path, serial_results, case, nprocs):
    # 7.2 A box, ghost cutoff r_max + 2 A skin > 7 A: on 2 and 4 ranks each subdomain is thinner than
    # the ghost shell, so features and gradients travel through multi-hop swaps as well.
    serial = serial_results(case)
    lmp = lammps_results(tmp_path, case, nprocs)
    assert_agree(lmp, reference_path(tmp_path, case), TOL64, f"{case} on {nprocs} ranks vs reference path")
    # Per-atom virials travel home through LAMMPS's reverse communication of compute stress/atom.
    np.testing.assert_allclose(lmp["atom_virial"], serial["atom_virial"], rtol=0, atol=TOL64)
    np.testing.assert_allclose(lmp["atom_virial_sum"], lmp["virial"], rtol=TOL64, atol=TOL64)


@pytest.mark.parametrize("nprocs", [1, 2])
@pytest.mark.parametrize("style", ["path reference", "path fast edge_chunk 7"])
def test_both_paths_and_small_chunks_in_lammps(tmp_path, style, nprocs):
    # The default runs above use the fast path with the planner's chunks; here the oracle itself and
    # the fast path with chunk boundaries inside receivers' edge lists, serial and across ranks.
    lmp = lammps_results(tmp_path, "small_l1", nprocs, style=style)
    assert_agree(lmp, official_mace("small_l1"), TOL64, f"small_l1 {style} on {nprocs} ranks vs official MACE")


def test_float32_is_close_to_float64_reference(tmp_path):
    lmp = lammps_results(tmp_path, "small_l1", 1, style="dtype float32")
    assert_agree(lmp, reference_path(tmp_path, "small_l1"), TOL32, "small_l1 float32 vs float64 reference path")


@pytest.mark.parametrize("nprocs", [1, 2])
def test_radial_spline_is_close_to_the_exact_mlp(tmp_path, nprocs):
    # radial spline (opt-in): the automatic float64 tables are within ~1e-10 of the radial MLP's
    # largest value and slope, so LAMMPS's numbers stay within 1e-8 of the reference path on 1 and 2
    # ranks (ghost rows and exchanges included), and the load message states the tables' error.
    lmp = lammps_results(tmp_path, "small_l1", nprocs, style="radial spline")
    ref = reference_path(tmp_path, "small_l1")
    assert_agree(lmp, ref, 1e-8, f"small_l1 radial spline on {nprocs} ranks")
    assert np.max(np.abs(lmp["forces"] - ref["forces"])) > 0  # a table, not the MLP
    output = (tmp_path / "lammps.out").read_text()
    # layers 0 and 1, and layer 0 per edge (reassociate auto keeps both first layers)
    assert output.count("radial spline: layer ") == 3 and "of max |dR/dr| (slopes)" in output
