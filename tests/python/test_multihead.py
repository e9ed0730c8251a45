"""Multi-head models (a fine-tuned foundation model's layout: mace-torch heads sharing one body, each
with its readout output, E0s, scale and shift): exported with every head, evaluated for any one of
them by name, against mace-torch's MACECalculator with that head (float64: energy 1e-12 relative,
forces and stress 1e-10), on the fast and the reference path; the default head is mace-torch's
(the one named "default"); a wrong or missing name is an error that lists the heads."""
import numpy as np
import pytest
import torch
from ase.build import bulk

import flashmace
import make_random_model

ENERGY_RTOL = 1e-12
ATOL = 1e-10


def export(tmp_path_factory, heads, seed):
    torch.set_default_dtype(torch.float64)
    model = make_random_model.build("tiny-cuni", seed=seed, heads=heads)
    out = tmp_path_factory.mktemp("multihead") / f"{'-'.join(heads)}.safetensors"
    flashmace.export(model, out)
    return model, str(out)


@pytest.fixture(scope="module")
def two_heads(tmp_path_factory):
    return export(tmp_path_factory, ["a", "b"], seed=8)


@pytest.fixture(scope="module")
def fine_tune(tmp_path_factory):
    return export(tmp_path_factory, ["pt_head", "Default"], seed=9)


def alloy(seed=0):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(2)
    rng = np.random.default_rng(seed)
    atoms.numbers[rng.random(len(atoms)) < 0.5] = 28
    atoms.rattle(0.05, seed=seed)
    return atoms


def mace_results(model, atoms, head):
    from mace.calculators import MACECalculator
    a = atoms.copy()
    a.calc = MACECalculator(models=[model], device="cpu", default_dtype="float64", head=head)
    return a.get_potential_energy(), a.get_forces(), a.get_stress()


def assert_equal(atoms, calc, want):
    energy, forces, stress = want
    a = atoms.copy()
    a.calc = calc
    assert abs(a.get_potential_energy() - energy) <= ENERGY_RTOL * abs(energy)
    assert np.max(np.abs(a.get_forces() - forces)) <= ATOL
    assert np.max(np.abs(a.get_stress() - stress)) <= ATOL
    return a.get_potential_energy()


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_every_head_equals_mace_torch(two_heads, path):
    model, file = two_heads
    atoms = alloy()
    energies = {}
    for head in ("a", "b"):
        energies[head] = assert_equal(atoms, flashmace.Calculator(file, head=head, path=path),
                                      mace_results(model, atoms, head))
    assert abs(energies["a"] - energies["b"]) > 1e-3  # two different heads, not one twice


def test_default_head_is_the_one_named_default(fine_tune):
    model, file = fine_tune
    atoms = alloy(seed=1)
    want = mace_results(model, atoms, "Default")
    assert_equal(atoms, flashmace.Calculator(file), want)
    assert_equal(atoms, flashmace.Calculator(file, head="pt_head"), mace_results(model, atoms, "pt_head"))


def test_wrong_or_missing_head_lists_the_heads(two_heads):
    _, file = two_heads
    with pytest.raises(RuntimeError, match="has no head 'c'; its heads: 'a', 'b'"):
        flashmace.Calculator(file, head="c")
    with pytest.raises(RuntimeError, match="2 heads \\('a', 'b'\\) and none named 'default': choose one"):
        flashmace.Calculator(file)
