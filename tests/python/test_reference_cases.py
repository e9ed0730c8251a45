"""flashmace.Calculator on the shared reference cases (../shared/reference: official MACE's outputs on a
periodic bulk and a cluster per model) against those outputs and against flashmace-eval on the same
structure: float64, energies <= 1e-12 relative, per-atom energies, forces and stress <= 1e-10."""
import json
import os
import subprocess

import numpy as np
import pytest
from ase import Atoms
from ase.stress import full_3x3_to_voigt_6_stress

import flashmace
from export_mace import read_safetensors

REF_DIR = os.environ["FLASHMACE_REFERENCE_DIR"]
MODELS = os.environ["FLASHMACE_EXPORTED_MODEL_DIR"]
EVAL = os.environ["FLASHMACE_EVAL"]
ENERGY_RTOL = 1e-12
ATOL = 1e-10


def case_atoms(t, prefix):
    pbc = np.asarray(t[f"{prefix}.input.pbc"], dtype=bool)
    return Atoms(numbers=t[f"{prefix}.input.atomic_numbers"], positions=t[f"{prefix}.input.positions"],
                 cell=t[f"{prefix}.input.cell"], pbc=pbc)


def eval_cli(model, atoms, tmp_path):
    # (written with every digit: ASE's extxyz writer rounds positions to 1e-8 A)
    path = tmp_path / "s.xyz"
    lattice = " ".join(repr(float(v)) for v in atoms.cell.array.ravel())
    pbc = " ".join("T" if p else "F" for p in atoms.pbc)
    lines = [str(len(atoms)), f'Lattice="{lattice}" Properties=species:S:1:pos:R:3 pbc="{pbc}"']
    lines += [f"{s} " + " ".join(repr(float(v)) for v in p)
              for s, p in zip(atoms.get_chemical_symbols(), atoms.positions)]
    path.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([EVAL, "--model", model, "--xyz", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_close(got, want, what):
    for key in ("energy",):
        assert abs(got[key] - want[key]) <= ENERGY_RTOL * abs(want[key]), (what, key, got[key], want[key])
    for key in ("node_energy", "forces", "stress"):
        if want.get(key) is None:
            continue
        diff = np.max(np.abs(np.asarray(got[key]) - np.asarray(want[key])))
        assert np.isfinite(diff) and diff <= ATOL, (what, key, diff)


@pytest.mark.parametrize("prefix", ["bulk", "cluster"])
@pytest.mark.parametrize("case", ["small_l1", "scalar_l0", "large_l2"])
def test_equals_official_mace_and_flashmace_eval(case, prefix, tmp_path):
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    model = os.path.join(MODELS, f"{case}.safetensors")
    atoms = case_atoms(t, prefix)
    atoms.calc = flashmace.Calculator(model, dtype="float64")
    periodic = all(atoms.pbc)
    got = {"energy": atoms.get_potential_energy(), "node_energy": atoms.get_potential_energies(),
           "forces": atoms.get_forces(), "stress": atoms.get_stress() if periodic else None}
    official = {"energy": float(t[f"{prefix}.output.energy"][0]), "node_energy": t[f"{prefix}.output.node_energy"],
                "forces": t[f"{prefix}.output.forces"],
                "stress": full_3x3_to_voigt_6_stress(t[f"{prefix}.output.stress"].reshape(3, 3)) if periodic else None}
    assert_close(got, official, f"{case} {prefix} vs official MACE")
    cli = eval_cli(model, atoms, tmp_path)
    cli["stress"] = full_3x3_to_voigt_6_stress(np.array(cli["stress"])) if periodic else None
    assert_close(got, cli, f"{case} {prefix} vs flashmace-eval")
