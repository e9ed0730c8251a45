"""Per-structure inputs (tools/make_random_model.py tiny-omol: MACE-OMOL's total charge and spin
embeddings, random weights) from Python: flashmace.Calculator reads atoms.info["charge"] and ["spin"]
as mace-torch's MACECalculator does, with its defaults (charge 0, spin 1) where they are absent, and
keywords charge=, spin= fix them; energy, forces and stress equal MACECalculator's on the same atoms
(float64: 1e-12 relative, 1e-10), on the fast and the reference path, as the values change between
calls on one calculator."""
import numpy as np
import pytest
import torch
from ase.build import bulk

import flashmace
import make_random_model

ENERGY_RTOL = 1e-12
ATOL = 1e-10


@pytest.fixture(scope="module")
def omol(tmp_path_factory):
    torch.set_default_dtype(torch.float64)
    model = make_random_model.build("tiny-omol", seed=6)
    out = tmp_path_factory.mktemp("omol") / "tiny-omol.safetensors"
    flashmace.export(model, out)
    return model, str(out)


def alloy(info):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(2)
    rng = np.random.default_rng(2)
    atoms.numbers[rng.random(len(atoms)) < 0.5] = 28
    atoms.rattle(0.05, seed=2)
    atoms.info.update(info)
    return atoms


def mace_results(model, atoms):
    from mace.calculators import MACECalculator
    a = atoms.copy()
    a.calc = MACECalculator(models=[model], device="cpu", default_dtype="float64")
    return a.get_potential_energy(), a.get_forces(), a.get_stress()


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_calculator_reads_charge_and_spin_as_mace_torch(omol, path):
    model, file = omol
    calc = flashmace.Calculator(file, path=path)
    energies = []
    for info in ({}, {"charge": 1, "spin": 2}, {"charge": -1}, {"charge": 1, "spin": 2}):
        atoms = alloy(info)
        energy, forces, stress = mace_results(model, atoms)
        atoms.calc = calc
        assert abs(atoms.get_potential_energy() - energy) <= ENERGY_RTOL * abs(energy), info
        assert np.max(np.abs(atoms.get_forces() - forces)) <= ATOL, info
        assert np.max(np.abs(atoms.get_stress() - stress)) <= ATOL, info
        energies.append(energy)
    assert len({round(e, 8) for e in energies}) == 3  # (the inputs change the energy: test design)


def test_keywords_fix_the_inputs(omol):
    model, file = omol
    want = mace_results(model, alloy({"charge": 2, "spin": 3}))[0]
    atoms = alloy({"charge": -4})  # (ignored: the keywords win)
    atoms.calc = flashmace.Calculator(file, charge=2, spin=3)
    assert abs(atoms.get_potential_energy() - want) <= ENERGY_RTOL * abs(want)
