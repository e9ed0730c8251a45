"""pair_style mace/flash charge Q spin S on a model with per-structure inputs (tools/make_random_model.py
tiny-omol: MACE-OMOL's total charge and spin embeddings, random weights): the step-0 energy, per-atom
energies, forces and virial equal flashmace-eval --charge Q --spin S --path reference on the same
structure (float64: 1e-12 relative, 1e-10 eV, eV/A) on 1 and 2 ranks, for given values and for
mace-torch's defaults (charge 0, spin 1), which the load message names; the values change the
energy; a value outside the model's classes, or a charge for a model without that input, stops LAMMPS
with the reason. (Against mace-torch itself: tests/reference/test_live_mace.py system_*.)"""
import os
import subprocess
import sys

import numpy as np
import pytest
from lammps_harness import (MODEL_DECK, STEP0_OUTPUT, distorted_cuni, eval_reference, run_lammps, run_lammps_error,
                            step0_results, write_data)

SOURCE = os.environ["FLASHMACE_SOURCE_DIR"]
ENERGY_RTOL = 1e-12
TOL64 = 1e-10

# distorted fcc Cu/Ni (32 atoms) in LAMMPS's frame
STRUCTURE = distorted_cuni(5)
NUMBERS, POSITIONS, CELL = STRUCTURE


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("omol") / "tiny-omol.safetensors"
    subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "make_random_model.py"), "tiny-omol", str(out),
                    "--seed", "4"], check=True, capture_output=True, text=True)
    return str(out)


def lammps(workdir, model, style):
    elements = write_data(workdir / "s.data", NUMBERS, POSITIONS, CELL)
    return workdir, MODEL_DECK.format(style=style, model=model, elements=" ".join(elements))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_charge_and_spin_equal_flashmace_eval(tmp_path, model, nprocs):
    energies = []
    for name, style, flags, said in (("defaults", "", [], "total_charge 0 (default), total_spin 1 (default)"),
                                     ("cation", "charge 1 spin 2", ["--charge", "1", "--spin", "2"],
                                      "total_charge 1, total_spin 2"),
                                     ("anion", "charge -2 spin 3", ["--charge", "-2", "--spin", "3"],
                                      "total_charge -2, total_spin 3")):
        workdir = tmp_path / name
        workdir.mkdir()
        workdir, deck = lammps(workdir, model, style)
        out = run_lammps(workdir, deck + STEP0_OUTPUT, nprocs=nprocs)
        assert "per-structure inputs: " + said in out, out[-2000:]
        lmp, ref = step0_results(workdir, out), eval_reference(workdir, model, STRUCTURE, flags)
        assert abs(lmp["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"]), \
            (name, lmp["energy"], ref["energy"])
        for key in ("node_energy", "forces", "virial"):
            np.testing.assert_allclose(lmp[key], ref[key], rtol=0, atol=TOL64, err_msg=f"{name} {key}")
        energies.append(lmp["energy"])
    assert min(abs(a - b) for i, a in enumerate(energies) for b in energies[i + 1:]) > 1e-4


def test_bad_values_stop_with_the_reason(tmp_path, model):
    (tmp_path / "range").mkdir()
    out = run_lammps_error(*lammps(tmp_path / "range", model, "charge 150"))
    assert "total_charge 150 is not one of its values (the integers -100 to 100)" in out
    (tmp_path / "half").mkdir()
    out = run_lammps_error(*lammps(tmp_path / "half", model, "spin 1.5"))
    assert "total_spin 1.5 is not one of its values" in out
    (tmp_path / "none").mkdir()
    plain = os.path.join(SOURCE, "potentials", "testing", "tiny-cuni-random.safetensors")
    out = run_lammps_error(*lammps(tmp_path / "none", plain, "charge 1"))
    assert "does not read total_charge (its per-structure inputs: none); drop the charge keyword" in out
