"""pair_style mace/flash head NAME on a model made by mace-torch's own multi-head fine-tuning
(tools/finetune_multihead.py: a tiny Cu-Ni foundation trained by mace_run_train, fine-tuned with
--multiheads_finetuning=True on new EAM-labelled data, exported with tools/export_mace.py): the file
has the fine-tuned model's heads, pt_head and Default; each head's step-0 energy, per-atom energies,
forces and virial equal flashmace-eval --head NAME --path reference on the same structure, and its
energy, forces and virial equal mace-torch's calculator with that head on the fine-tuned .model
(float64: 1e-12 relative, 1e-10 eV, eV/A); without the keyword LAMMPS runs Default, mace-torch's
default head; the two heads differ in energy and forces. (Random-weight heads: test_multihead.py.)"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from export_mace import METADATA_KEY, read_safetensors
from lammps_harness import (LMP, MODEL_DECK, STEP0_OUTPUT, distorted_cuni, eval_reference, run_lammps, step0_results,
                            write_data)

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6

SOURCE = os.environ["FLASHMACE_SOURCE_DIR"]
HEADS = ["pt_head", "Default"]  # mace-torch's: the foundation's head first, then the fine-tuned one
# float64 evaluations of one model by three programs differ by summation order only (measured here:
# energy 4e-16 relative, forces 4e-16 eV/A, virial 1e-15 eV).
ENERGY_RTOL = 1e-12
TOL64 = 1e-10
# On this structure the heads differ by 0.45 eV (0.29 eV of it their E0s, the rest the readouts the
# fine-tune moved apart) and 2.2e-3 eV/A in forces; running one head twice would give zero for both.
MIN_HEAD_ENERGY_GAP = 1e-2
MIN_HEAD_FORCE_GAP = 1e-4

# distorted fcc Cu/Ni (32 atoms) in LAMMPS's frame (test_multihead.py's)
STRUCTURE = distorted_cuni(3)
NUMBERS, POSITIONS, CELL = STRUCTURE


@pytest.fixture(scope="module")
def fine_tune(tmp_path_factory):
    """(exported file, fine-tuned mace-torch .model); flashmace-lmp labels the data (Debian's LAMMPS
    library, eam/alloy included)."""
    out = tmp_path_factory.mktemp("finetune")
    proc = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "finetune_multihead.py"), str(out),
                           "--lmp", LMP], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"finetune_multihead.py failed:\n{(proc.stdout + proc.stderr)[-6000:]}"
    return str(out / "CuNi-two-heads.safetensors"), str(out / "finetune" / "CuNi-ft.model")


def lammps(workdir, model, style):
    workdir.mkdir()
    elements = write_data(workdir / "s.data", NUMBERS, POSITIONS, CELL)
    deck = MODEL_DECK.format(style=style, model=model, elements=" ".join(elements))
    out = run_lammps(workdir, deck + STEP0_OUTPUT)
    return out, step0_results(workdir, out)


def mace_torch(model, head):
    from ase import Atoms
    from mace.calculators import MACECalculator
    atoms = Atoms(numbers=NUMBERS, positions=POSITIONS, cell=CELL, pbc=True)
    atoms.calc = MACECalculator(model_paths=model, device="cpu", default_dtype="float64", head=head)
    return {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces(),
            "virial": -atoms.get_stress(voigt=False) * atoms.get_volume()}


def assert_equal(lmp, ref, keys, what):
    assert abs(lmp["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"]), (what, lmp["energy"], ref["energy"])
    for key in keys:
        np.testing.assert_allclose(lmp[key], ref[key], rtol=0, atol=TOL64, err_msg=f"{what} {key}")


def test_exported_file_has_the_fine_tuned_heads(fine_tune):
    import torch
    file, model = fine_tune
    assert list(torch.load(model, map_location="cpu", weights_only=False).heads) == HEADS
    _, metadata = read_safetensors(file)
    assert json.loads(metadata[METADATA_KEY])["heads"] == HEADS


def test_each_head_equals_flashmace_eval_and_mace_torch(tmp_path, fine_tune):
    file, model = fine_tune
    results = {}
    for head in HEADS:
        out, lmp = lammps(tmp_path / head, file, f"head {head}")
        assert f"head '{head}' of 'pt_head', 'Default'" in out
        ref = eval_reference(tmp_path / head, file, STRUCTURE, ("--head", head))
        assert_equal(lmp, ref, ("node_energy", "forces", "virial"), f"head {head} against flashmace-eval")
        assert_equal(lmp, mace_torch(model, head), ("forces", "virial"), f"head {head} against mace-torch")
        results[head] = lmp
    pt, ft = (results[head] for head in HEADS)
    assert abs(pt["energy"] - ft["energy"]) > MIN_HEAD_ENERGY_GAP, (pt["energy"], ft["energy"])
    assert np.max(np.abs(pt["forces"] - ft["forces"])) > MIN_HEAD_FORCE_GAP


def test_without_the_keyword_lammps_runs_default(tmp_path, fine_tune):
    file, _ = fine_tune
    out, lmp = lammps(tmp_path / "none", file, "")
    assert "head 'Default' of 'pt_head', 'Default'" in out
    _, named = lammps(tmp_path / "Default", file, "head Default")
    assert lmp["energy"] == named["energy"]
    np.testing.assert_array_equal(lmp["forces"], named["forces"])
