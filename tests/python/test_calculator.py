"""flashmace.Calculator (python/flashmace): against mace-torch's MACECalculator on live random
models (periodic and not), against the reference path (per-atom energies and stresses), against
ASE's finite differences; the neighbour list kept between calls while atoms move less than half
the skin (and results equal to a fresh list's); flashmace.export from live objects and saved files;
clear errors. Float64 throughout: energies <= 1e-12 relative, forces and stresses <= 1e-10."""
import os

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk

import flashmace
import make_random_model

ENERGY_RTOL = 1e-12
ATOL = 1e-10
MODELS = os.environ["FLASHMACE_EXPORTED_MODEL_DIR"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A random tiny Cu/Ni mace-torch model (tools/make_random_model.py) and its export."""
    torch.set_default_dtype(torch.float64)
    model = make_random_model.build("tiny-cuni", seed=3)
    out = tmp_path_factory.mktemp("live") / "tiny.safetensors"
    flashmace.export(model, out)
    return model, str(out)


def alloy(repeat=2, seed=0, periodic=True):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(repeat)
    rng = np.random.default_rng(seed)
    atoms.numbers[rng.random(len(atoms)) < 0.4] = 28
    atoms.rattle(0.05, seed=seed)
    if not periodic:
        atoms.pbc = False
        atoms.center(vacuum=4.0)
    return atoms


def mace_results(model, atoms):
    from mace.calculators import MACECalculator
    calc = MACECalculator(models=[model], device="cpu", default_dtype="float64")
    a = atoms.copy()
    a.calc = calc
    return a.get_potential_energy(), a.get_forces(), (a.get_stress() if all(a.pbc) else None)


@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "cluster"])
def test_equals_mace_torch_on_a_live_model(live, periodic):
    model, path = live
    atoms = alloy(periodic=periodic)
    energy, forces, stress = mace_results(model, atoms)
    atoms.calc = flashmace.Calculator(path, dtype="float64")
    assert abs(atoms.get_potential_energy() - energy) <= ENERGY_RTOL * abs(energy)
    assert np.max(np.abs(atoms.get_forces() - forces)) <= ATOL
    if periodic:
        assert np.max(np.abs(atoms.get_stress() - stress)) <= ATOL
    print(f"{'periodic' if periodic else 'cluster'}: E {energy:.12f} eV, max |F| {np.abs(forces).max():.3e}")


@pytest.mark.parametrize("model", ["small_l1", "large_l2"])
def test_per_atom_values_equal_the_reference_path(model):
    path = f"{MODELS}/{model}.safetensors"
    atoms = alloy(seed=1)  # Ni/Cu for small_l1; all Si (a diamond-free fcc at 3.6 A) for large_l2
    if model == "large_l2":
        atoms.numbers[:] = 14
    fast, ref = atoms.copy(), atoms.copy()
    fast.calc = flashmace.Calculator(path)
    ref.calc = flashmace.Calculator(path, path="reference")
    e = fast.get_potential_energies()
    assert np.max(np.abs(e - ref.get_potential_energies())) <= ATOL
    assert abs(e.sum() - fast.get_potential_energy()) <= ENERGY_RTOL * abs(e.sum())
    s = fast.get_stresses()
    assert np.max(np.abs(s - ref.get_stresses())) <= ATOL
    # the per-atom stresses add up to the stress (ASE's Voigt order on both)
    assert np.max(np.abs(s.sum(axis=0) - fast.get_stress())) <= ATOL


def test_finite_differences(live):
    _, path = live
    atoms = alloy(repeat=1, seed=2)
    atoms.calc = flashmace.Calculator(path)
    numeric = atoms.calc.calculate_numerical_forces(atoms, d=1e-5)
    assert np.max(np.abs(atoms.get_forces() - numeric)) <= 1e-7
    numeric_stress = atoms.calc.calculate_numerical_stress(atoms, d=1e-6)
    assert np.max(np.abs(atoms.get_stress() - numeric_stress)) <= 1e-7


def test_list_is_kept_while_atoms_move_less_than_half_the_skin(live):
    _, path = live
    atoms = alloy(seed=4)
    kept = flashmace.Calculator(path, skin=1.0)
    fresh = flashmace.Calculator(path, skin=0.0)
    rng = np.random.default_rng(5)
    start = atoms.positions.copy()
    for step in range(5):
        atoms.positions = start + rng.uniform(-0.1, 0.1, start.shape)  # at most 0.17 A < 0.5 A
        e_kept, f_kept = kept.get_potential_energy(atoms), kept.get_forces(atoms)
        e_fresh, f_fresh = fresh.get_potential_energy(atoms), fresh.get_forces(atoms)
        assert abs(e_kept - e_fresh) <= ENERGY_RTOL * abs(e_fresh)
        assert np.max(np.abs(f_kept - f_fresh)) <= ATOL
    counters = kept.session.counters
    assert kept.session.list_builds == 1 and counters["topology_builds"] == 1, counters
    assert fresh.session.list_builds == 5
    atoms.positions = start + np.array([0.6, 0.0, 0.0]) * (np.arange(len(atoms)) % 2)[:, None]  # beyond skin / 2
    kept.get_potential_energy(atoms)
    assert kept.session.list_builds == 2


def test_export_of_a_saved_model_file(live, tmp_path):
    model, path = live
    saved = tmp_path / "tiny.model"
    torch.save(model, saved)
    out = flashmace.export(saved, tmp_path / "from-file.safetensors", dtype="float32")
    atoms = alloy(seed=6)
    a, b = atoms.copy(), atoms.copy()
    a.calc = flashmace.Calculator(path)
    b.calc = flashmace.Calculator(out, dtype="float32")
    assert b.calc.session.dtype == "float32"
    assert abs(a.get_potential_energy() - b.get_potential_energy()) <= 1e-5 * abs(a.get_potential_energy())


def test_errors_name_the_problem(live):
    _, path = live
    with pytest.raises(TypeError, match="unknown option edge_chunks"):
        flashmace.Calculator(path, edge_chunks=7)
    with pytest.raises(RuntimeError, match="has no head 'mp'; its heads: 'Default'"):
        flashmace.Calculator(path, head="mp")
    with pytest.raises(RuntimeError, match="not trained on"):
        Atoms("Cu2O", positions=[[0, 0, 0], [2.5, 0, 0], [0, 2.5, 0]],
              calculator=flashmace.Calculator(path)).get_potential_energy()
    with pytest.raises(RuntimeError, match="overlapping"):
        Atoms("Cu2", positions=[[0, 0, 0], [0.05, 0, 0]], calculator=flashmace.Calculator(path)).get_potential_energy()
    with pytest.raises(Exception, match="stress"):
        Atoms("Cu2", positions=[[0, 0, 0], [2.5, 0, 0]], calculator=flashmace.Calculator(path)).get_stress()


def test_the_build_venv_imports_this_package_without_pythonpath():
    # python/CMakeLists.txt writes a .pth naming build/python into the venv the build used.
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import flashmace; print(flashmace.__file__)"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.path.samefile(proc.stdout.strip(), flashmace.__file__)
