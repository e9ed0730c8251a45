"""Many elements at once: the fast path equals the reference path with every choice of the first
interaction, and mace-torch, for 1, 2, 3, 5 and all 89 elements present.

The model is make_random_model.py's tiny-89 (tiny-cuni's shape with the 89 elements of MACE-MP-0,
random weights). Each structure is a rattled 3x3x3 fcc cell (108 atoms, a = 3.6 A, about 40
neighbours within r_max 4.5 A) whose atoms take N elements drawn from the 89 (every one of the N
present at least once: all 89 for N = 89, the rest at random). flashmace-eval runs it in float64
with --path reference (the oracle) and with --path fast and --reassociate on (the first interaction
per sender element, N slots), off (per edge) and auto; each fast run must equal the reference to the
acceptance tolerances (energy 1e-12 relative, forces and stress 1e-10 absolute), and the reference
must equal mace-torch on the 89-element structure (independent truth). In float32 the fast path's
forces must be within 1e-4 of float64's, norm-wise (|F32 - F64| / |F64| over all components).
Test design: mace-torch's forces exceed 1e-3 eV/A, so the comparison exercises the interactions."""
import json
import os
import subprocess

import numpy as np
import pytest

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
torch = pytest.importorskip("torch")
ase = pytest.importorskip("ase")
from mace import data as mace_data  # noqa: E402
from mace.tools import torch_geometric, utils  # noqa: E402

import export_mace  # noqa: E402
import make_random_model  # noqa: E402

EVAL = os.environ["FLASHMACE_EVAL"]
ENERGY_RTOL = 1e-12
FORCE_ATOL = 1e-10
STRESS_ATOL = 1e-10
FLOAT32_FORCE_RTOL = 1e-4
ELEMENTS_PRESENT = [1, 2, 3, 5, 89]
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    m = make_random_model.build("tiny-89", seed=3)
    m.eval()
    path = tmp_path_factory.mktemp("model") / "tiny-89.safetensors"
    meta = export_mace.export_model(m, path)
    assert meta["atomic_numbers"] == make_random_model.MP0_ELEMENTS
    return m, path


def structure(n, rng):
    """A rattled 3x3x3 fcc cell (108 atoms) with n of the 89 elements, each present."""
    basis = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    cells = np.array([[i, j, k] for i in range(3) for j in range(3) for k in range(3)], dtype=float)
    a = 3.6
    positions = ((cells[:, None, :] + basis[None]) * a).reshape(-1, 3) + rng.normal(0, 0.08, (108, 3))
    chosen = rng.choice(make_random_model.MP0_ELEMENTS, size=n, replace=False)
    numbers = np.concatenate([chosen, rng.choice(chosen, size=108 - n)])
    rng.shuffle(numbers)
    assert len(set(numbers)) == n
    return ase.Atoms(numbers=numbers, positions=positions, cell=3 * a * np.eye(3), pbc=True)


def write_xyz(path, atoms):
    header = 'Lattice="%s" pbc="T T T" Properties=species:S:1:pos:R:3' % " ".join(
        repr(float(x)) for x in np.ravel(atoms.cell.array))
    lines = [str(len(atoms)), header]
    lines += ["%s %r %r %r" % (s, *map(float, p)) for s, p in zip(atoms.get_chemical_symbols(), atoms.positions)]
    path.write_text("\n".join(lines) + "\n")


def flashmace(model_path, xyz, *options):
    proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), *options], capture_output=True,
                          text=True)
    assert proc.returncode == 0, f"flashmace-eval {' '.join(options)} failed: {proc.stderr}"
    return json.loads(proc.stdout), proc.stderr


def assert_close(got, want, atol, what):
    """Max |got - want| <= atol, and both finite: a NaN or Inf fails rather than compares false."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    assert np.isfinite(want).all() and np.isfinite(got).all(), f"{what}: non-finite values"
    error = float(np.abs(got - want).max())
    assert error <= atol, f"{what}: max difference {error:.3g} > {atol:g}"


def mace_torch(m, atoms):
    zs = make_random_model.MP0_ELEMENTS
    config = mace_data.config_from_atoms(atoms)
    data = mace_data.AtomicData.from_config(config, z_table=utils.AtomicNumberTable(zs), cutoff=float(m.r_max))
    batch = next(iter(torch_geometric.dataloader.DataLoader([data], batch_size=1)))
    out = m(batch.to_dict(), compute_stress=True, training=False)
    return float(out["energy"].detach()[0]), out["forces"].detach().numpy(), out["stress"].detach().numpy()[0]


@pytest.mark.parametrize("n", ELEMENTS_PRESENT)
def test_fast_path_equals_reference_for_every_first_interaction(model, tmp_path, n):
    m, model_path = model
    atoms = structure(n, np.random.default_rng(100 + n))
    xyz = tmp_path / f"elements{n}.xyz"
    write_xyz(xyz, atoms)
    want, _ = flashmace(model_path, xyz, "--path", "reference", "--dtype", "float64")
    assert np.abs(np.asarray(want["forces"])).max() > 1e-3, "forces are negligible (test design)"
    if n == 89:  # the oracle against independent truth, with every element present
        energy, forces, stress = mace_torch(m, atoms)
        assert abs(want["energy"] - energy) <= ENERGY_RTOL * abs(energy), f"reference {want['energy']!r} vs {energy!r}"
        assert_close(want["forces"], forces, FORCE_ATOL, "reference forces vs mace-torch")
        assert_close(want["stress"], stress, STRESS_ATOL, "reference stress vs mace-torch")
    for choice in ("on", "off", "auto"):
        what = f"{n} elements, --reassociate {choice}"
        got, log = flashmace(model_path, xyz, "--path", "fast", "--dtype", "float64", "--reassociate", choice)
        assert abs(got["energy"] - want["energy"]) <= ENERGY_RTOL * abs(want["energy"]), \
            f"{what}: energy {got['energy']!r} vs reference {want['energy']!r}"
        assert_close(got["forces"], want["forces"], FORCE_ATOL, what + ": forces")
        assert_close(got["stress"], want["stress"], STRESS_ATOL, what + ": stress")
        assert_close(got["node_energy"], want["node_energy"], FORCE_ATOL, what + ": node energies")
        # The choice is the one asked for (auto: per sender element up to 8 elements present).
        per_element = choice == "on" or (choice == "auto" and n <= 8)
        said = "per sender element" if per_element else "per edge"
        said += f" ({n} elements present" if choice == "auto" else f" (reassociate {choice})"
        assert f"first interaction: {said}" in log, f"{what}: the load log says {log!r}"
    got32, _ = flashmace(model_path, xyz, "--path", "fast", "--dtype", "float32")
    f64, f32 = np.asarray(want["forces"]), np.asarray(got32["forces"])
    assert np.isfinite(f32).all(), "float32 forces are not finite"
    error = np.linalg.norm(f32 - f64) / np.linalg.norm(f64)
    assert error <= FLOAT32_FORCE_RTOL, f"{n} elements: float32 forces {error:.3g} from float64's, norm-wise"
