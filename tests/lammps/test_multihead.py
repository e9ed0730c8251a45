"""pair_style mace/flash head NAME on a multi-head model (tools/make_random_model.py tiny-cuni --heads a,b:
mace-torch's multi-head layout, random weights; and tiny-mh1, MACE-MH-1's NonLinear blocks): each head's step-0 energy, per-atom energies, forces
and virial equal flashmace-eval --head NAME --path reference on the same structure (float64: 1e-12
relative, 1e-10 eV, eV/A) on 1 and 2 ranks, the two heads differ, and a wrong or missing head stops LAMMPS with the
list of the model's heads. (Against mace-torch's own calculator: tests/python/test_multihead.py.)"""
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
RNG = np.random.default_rng(3)
CELL = np.diag([7.2, 7.3, 7.1])
FRAC = (np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)])[:, None, :] +
        np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])[None]).reshape(-1, 3) / 2
POSITIONS = FRAC @ CELL + RNG.uniform(-0.05, 0.05, (32, 3))
NUMBERS = np.where(RNG.random(32) < 0.5, 28, 29)


@pytest.fixture(scope="module", params=["tiny-cuni", "tiny-mh1"])
def model(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("multihead") / f"{request.param}-two-heads.safetensors"
    subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "make_random_model.py"), request.param, str(out),
                    "--heads", "a,b", "--seed", "8"], check=True, capture_output=True, text=True)
    return str(out)


def lammps(workdir, model, style):
    elements = write_data(workdir / "s.data", NUMBERS, POSITIONS, CELL)
    deck = MODEL_DECK.format(style=style, model=model, elements=" ".join(elements))
    return workdir, deck


def eval_reference(workdir, model, head):
    write_extxyz(workdir / "s.xyz", NUMBERS, POSITIONS, CELL)
    proc = subprocess.run([EVAL, "--model", model, "--xyz", str(workdir / "s.xyz"), "--head", head, "--path",
                           "reference"], capture_output=True, text=True, check=True)
    r = json.loads(proc.stdout)
    return {"energy": r["energy"], "node_energy": np.array(r["node_energy"]), "forces": np.array(r["forces"]),
            "virial": -np.array(r["stress"]) * abs(np.linalg.det(CELL))}


@pytest.mark.parametrize("nprocs", [1, 2])
def test_each_head_equals_flashmace_eval(tmp_path, model, nprocs):
    energies = {}
    for head in ("a", "b"):
        workdir = tmp_path / head
        workdir.mkdir()
        workdir, deck = lammps(workdir, model, f"head {head}")
        out = run_lammps(workdir, deck + STEP0_OUTPUT, nprocs=nprocs)
        assert f"head '{head}' of 'a', 'b'" in out
        lmp, ref = step0_results(workdir, out), eval_reference(workdir, model, head)
        assert abs(lmp["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"]), \
            (head, lmp["energy"], ref["energy"])
        for key in ("node_energy", "forces", "virial"):
            np.testing.assert_allclose(lmp[key], ref[key], rtol=0, atol=TOL64, err_msg=f"head {head} {key}")
        energies[head] = lmp["energy"]
    assert abs(energies["a"] - energies["b"]) > 1e-3


def test_wrong_or_missing_head_stops_with_the_heads(tmp_path, model):
    (tmp_path / "c").mkdir()
    out = run_lammps_error(*lammps(tmp_path / "c", model, "head c"))
    assert "has no head 'c'; its heads: 'a', 'b'" in out
    (tmp_path / "none").mkdir()
    out = run_lammps_error(*lammps(tmp_path / "none", model, ""))
    assert "2 heads ('a', 'b') and none named 'default': choose one" in out
