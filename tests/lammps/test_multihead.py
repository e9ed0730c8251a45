"""pair_style mace/flash head NAME on a multi-head model (tools/make_random_model.py tiny-cuni --heads a,b:
mace-torch's multi-head layout, random weights; and tiny-mh1, MACE-MH-1's NonLinear blocks): each
head's step-0 energy, per-atom energies, forces and virial equal flashmace-eval --head NAME --path
reference on the same structure (float64: 1e-12 relative, 1e-10 eV, eV/A) on 1 and 2 ranks, the two
heads differ, and a wrong or missing head stops LAMMPS with the list of the model's heads. (Against
mace-torch's own calculator: tests/python/test_multihead.py.)"""
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
STRUCTURE = distorted_cuni(3)
NUMBERS, POSITIONS, CELL = STRUCTURE


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


@pytest.mark.parametrize("nprocs", [1, 2])
def test_each_head_equals_flashmace_eval(tmp_path, model, nprocs):
    energies = {}
    for head in ("a", "b"):
        workdir = tmp_path / head
        workdir.mkdir()
        workdir, deck = lammps(workdir, model, f"head {head}")
        out = run_lammps(workdir, deck + STEP0_OUTPUT, nprocs=nprocs)
        assert f"head '{head}' of 'a', 'b'" in out
        lmp, ref = step0_results(workdir, out), eval_reference(workdir, model, STRUCTURE, ("--head", head))
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
