"""pair_style mace/flash charge Q spin S on a model with per-structure inputs (tools/make_random_model.py
tiny-omol: MACE-OMOL's total charge and spin embeddings, random weights): the step-0 energy, per-atom
energies, forces and virial equal flashmace-eval --charge Q --spin S --path reference on the same
structure (float64: 1e-12 relative, 1e-10 eV, eV/A) on 1 and 2 ranks, for given values and for
mace-torch's defaults (charge 0, spin 1), which the load message names; the values change the
energy; a value outside the model's classes, or a charge for a model without that input, stops LAMMPS
with the reason. (Against mace-torch itself: tests/reference/test_live_mace.py system_*.)"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from lammps_harness import (MODEL_DECK, STEP0_OUTPUT, run_lammps, run_lammps_error, step0_results, write_data,
                            write_extxyz)

SOURCE = os.environ["FLASHMACE_SOURCE_DIR"]
EVAL = os.environ["FLASHMACE_EVAL"]
ENERGY_RTOL = 1e-12
TOL64 = 1e-10

# distorted fcc Cu/Ni, 2x2x2 conventional cells (32 atoms) in LAMMPS's frame
RNG = np.random.default_rng(5)
CELL = np.diag([7.2, 7.3, 7.1])
FRAC = (np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)])[:, None, :] +
        np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])[None]).reshape(-1, 3) / 2
POSITIONS = FRAC @ CELL + RNG.uniform(-0.05, 0.05, (32, 3))
NUMBERS = np.where(RNG.random(32) < 0.5, 28, 29)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("omol") / "tiny-omol.safetensors"
    subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "make_random_model.py"), "tiny-omol", str(out),
                    "--seed", "4"], check=True, capture_output=True, text=True)
    return str(out)


def lammps(workdir, model, style):
    elements = write_data(workdir / "s.data", NUMBERS, POSITIONS, CELL)
    return workdir, MODEL_DECK.format(style=style, model=model, elements=" ".join(elements))


def eval_reference(workdir, model, flags):
    write_extxyz(workdir / "s.xyz", NUMBERS, POSITIONS, CELL)
    proc = subprocess.run([EVAL, "--model", model, "--xyz", str(workdir / "s.xyz"), "--path", "reference", *flags],
                          capture_output=True, text=True, check=True)
    r = json.loads(proc.stdout)
    return {"energy": r["energy"], "node_energy": np.array(r["node_energy"]), "forces": np.array(r["forces"]),
            "virial": -np.array(r["stress"]) * abs(np.linalg.det(CELL))}


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
        lmp, ref = step0_results(workdir, out), eval_reference(workdir, model, flags)
        assert abs(lmp["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"]), (name, lmp["energy"], ref["energy"])
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
