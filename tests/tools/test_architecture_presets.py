"""Every MACE foundation architecture of tools/make_random_model.py, exported, equals mace-torch.

Each preset (random weights, the preset's architecture, 2-3 of its elements so that the model stays
small) is built by make_random_model.build(), exported by export_mace.export_model(), and evaluated
by mace-torch and by flashmace-eval (--path reference and --path fast, float64) on a rattled
triclinic bulk cell, a slab (pbc T T F) and a molecule (no pbc). The exported metadata must
describe the preset's architecture (blocks, distance transform, ZBL, irreps, cutoff). Test design:
mace-torch's forces exceed 1e-3 eV/A on every structure, and the structures reach the ZBL range of
the presets that have it, so that the comparison exercises the interactions and the repulsion.

Tolerances are the reference path's acceptance criteria against MACE in float64 (as in
tests/reference/test_live_mace.py): energy 1e-12 relative, forces and stress 1e-10 eV/A (eV/A^3)
absolute. Stress is compared on the bulk only: for a slab mace-torch divides the virial by the volume
of a padded cell (test_live_mace.py's docstring), and a molecule has none."""
import json
import os
import subprocess
import zlib

import numpy as np
import pytest

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
torch = pytest.importorskip("torch")
ase = pytest.importorskip("ase")
from mace import data as mace_data  # noqa: E402
from mace.modules import symmetric_contraction  # noqa: E402
from mace.tools import torch_geometric, utils  # noqa: E402

import export_mace  # noqa: E402
import make_random_model  # noqa: E402

EVAL = os.environ["FLASHMACE_EVAL"]
ENERGY_RTOL = 1e-12
FORCE_ATOL = 1e-10
STRESS_ATOL = 1e-10
MIN_DISTANCE = 0.9  # A, between any two atoms of the molecule
MOLECULE_BOX = 4.0  # A: 8 A^3 per atom, some pairs within the ZBL range (sums of covalent radii)

# preset -> elements of its test model (a subset of the preset's own).
PRESET_ELEMENTS = {
    "mp0-small": [8, 14, 26],
    "mp0-medium": [3, 9],
    "mp0-large": [13, 29],
    "mp0b-small": [1, 8, 22],
    "mp0b-medium": [6, 14, 26],
    "mp0b2-small": [11, 17],
    "mp0b2-medium": [8, 12, 28],
    "mp0b2-large": [7, 31],
    "mp0b3-medium": [1, 8, 40],
    "mpa0-medium": [3, 8, 25],
    "omat0-small": [16, 30],
    "omat0-medium": [8, 14, 27],
    "matpes-pbe": [9, 20, 47],
    "off23-small": [1, 6, 8],
    "off23-medium": [1, 7, 16],
    "off23-large": [6, 8, 17],
    "off24-medium": [1, 6, 9],
    "mh1": [8, 13, 26],
    "omol0": [1, 6, 8],
}

# Speed only: MACE recomputes the symmetric-contraction coupling tensors (U_matrix_real, seconds each
# for correlation 3) for every product block of every model; they are a deterministic function of the
# arguments, so compute each once and hand MACE a fresh copy (as test_live_mace.py does).
_U_CACHE = {}
_U_matrix_real = symmetric_contraction.U_matrix_real


def _cached_U_matrix_real(*args, **kwargs):
    key = (tuple(str(a) for a in args), tuple(sorted((k, str(v)) for k, v in kwargs.items())))
    if key not in _U_CACHE:
        _U_CACHE[key] = _U_matrix_real(*args, **kwargs)
    return [x.clone() if torch.is_tensor(x) else x for x in _U_CACHE[key]]


symmetric_contraction.U_matrix_real = _cached_U_matrix_real
torch.set_num_threads(1)  # small graphs: threads only add overhead, and the test shares 2 cores


def test_every_foundation_preset_is_tested():
    assert set(PRESET_ELEMENTS) == {p for p in make_random_model.PRESETS if not p.startswith("tiny-")}


def bulk(rng, zs):
    """A 2x2x2 simple-cubic cell (2.5 A spacing), sheared into a triclinic one and rattled: 8 atoms."""
    grid = np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)], dtype=float)
    cell = 5.0 * (np.eye(3) + 0.1 * rng.uniform(-1, 1, (3, 3)))
    positions = grid / 2 @ cell + rng.normal(0, 0.15, (8, 3))
    return ase.Atoms(numbers=rng.choice(zs, size=8), positions=positions, cell=cell, pbc=True)


def slab(rng, zs):
    """Two rattled 2x2 layers (2.5 A spacing), periodic in plane; the third cell vector is tilted."""
    grid = np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)], dtype=float)
    cell = np.array([[5.0, 0.0, 0.0], [0.6, 5.0, 0.0], [1.0, -0.8, 12.0]])
    cell[:2, :2] += 0.1 * rng.uniform(-1, 1, (2, 2))
    positions = grid[:, :2] / 2 @ cell[:2, :2]
    positions = np.column_stack([positions, 2.5 * grid[:, 2]]) + rng.normal(0, 0.15, (8, 3))
    return ase.Atoms(numbers=rng.choice(zs, size=8), positions=positions, cell=cell, pbc=(True, True, False))


def molecule(rng, zs):
    """8 atoms in a cubic box of side MOLECULE_BOX, every pair at least MIN_DISTANCE apart (rejection sampling)."""
    positions = []
    while len(positions) < 8:
        trial = rng.uniform(0, MOLECULE_BOX, 3)
        if all(np.linalg.norm(trial - p) >= MIN_DISTANCE for p in positions):
            positions.append(trial)
    return ase.Atoms(numbers=rng.choice(zs, size=8), positions=np.array(positions))


STRUCTURES = {"bulk": bulk, "slab": slab, "molecule": molecule}


def mace_outputs(model, atoms, zs):
    """MACE's own data path (config_from_atoms -> AtomicData with MACE's neighbour list -> batch), and
    the ZBL energy (0 without ZBL) seen by a hook."""
    r_max = float(model.r_max)
    config = mace_data.config_from_atoms(atoms)
    data = mace_data.AtomicData.from_config(config, z_table=utils.AtomicNumberTable(zs), cutoff=r_max)
    batch = next(iter(torch_geometric.dataloader.DataLoader([data], batch_size=1)))
    pair = []
    hook = model.pair_repulsion_fn.register_forward_hook(lambda m, i, o: pair.append(o.detach())) \
        if hasattr(model, "pair_repulsion_fn") else None
    try:
        out = model(batch.to_dict(), compute_stress=bool(atoms.pbc.all()), training=False)
    finally:
        if hook is not None:
            hook.remove()
    result = {"energy": float(out["energy"].detach()[0]), "forces": out["forces"].detach().numpy()}
    if atoms.pbc.all():
        result["stress"] = out["stress"].detach().numpy()[0]
    result["pair_energy"] = float(pair[0].abs().sum()) if pair else 0.0
    return result


def write_xyz(path, atoms):
    header = "Properties=species:S:1:pos:R:3"
    if atoms.pbc.any():
        header = 'Lattice="%s" pbc="%s" ' % (" ".join(repr(float(x)) for x in np.ravel(atoms.cell.array)),
                                             " ".join("T" if p else "F" for p in atoms.pbc)) + header
    lines = [str(len(atoms)), header]
    lines += ["%s %r %r %r" % (s, *map(float, p)) for s, p in zip(atoms.get_chemical_symbols(), atoms.positions)]
    path.write_text("\n".join(lines) + "\n")


def flashmace(model_path, xyz, path, label):
    proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), "--dtype", "float64", "--path", path],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"{label}: flashmace-eval failed: {proc.stderr}"
    return json.loads(proc.stdout)


def assert_close(got, want, atol, what):
    """Max |got - want| <= atol, and both finite: a NaN or Inf fails rather than compares false."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs mace-torch {want.shape}"
    assert np.isfinite(want).all(), f"{what}: mace-torch gives non-finite values"
    assert np.isfinite(got).all(), f"{what}: flashmace gives non-finite values"
    error = float(np.abs(got - want).max())
    assert error <= atol, f"{what}: max |flashmace - mace-torch| = {error:.3g} > {atol:g}"


@pytest.mark.parametrize("preset", list(PRESET_ELEMENTS))
def test_exported_preset_matches_mace_torch(tmp_path, preset):
    zs = PRESET_ELEMENTS[preset]
    spec = make_random_model.PRESETS[preset]
    model = make_random_model.build(preset, seed=11, elements=zs)
    model.eval()
    model_path = tmp_path / "model.safetensors"
    meta = export_mace.export_model(model, model_path)

    first, later = spec["blocks"]
    assert (meta["interaction_cls_first"], meta["interaction_cls"]) == (first, later)
    assert str(meta["distance_transform"]) == spec["distance_transform"]
    assert meta["pair_repulsion"] == spec["pair_repulsion"]
    assert (meta["hidden_irreps"], meta["r_max"], meta["num_bessel"]) == (spec["hidden"], spec["r_max"],
                                                                          spec["num_bessel"])
    assert meta["atomic_numbers"] == zs

    rng = np.random.default_rng(zlib.crc32(preset.encode()))
    pair_energy = 0.0
    for kind, make in STRUCTURES.items():
        atoms = make(rng, zs)
        ref = mace_outputs(model, atoms, zs)
        pair_energy += ref["pair_energy"]
        xyz = tmp_path / f"{kind}.xyz"
        write_xyz(xyz, atoms)
        # Test design: the interactions must move the atoms measurably, or the force check says little.
        assert np.abs(ref["forces"]).max() > 1e-3, f"{preset} {kind}: mace-torch forces are negligible"
        for path in ("reference", "fast"):
            what = f"{preset} (Z {zs}) {kind}, --path {path}"
            got = flashmace(model_path, xyz, path, what)
            assert np.isfinite(ref["energy"]) and np.isfinite(got["energy"]), f"{what}: non-finite energy"
            assert abs(got["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"]), \
                f"{what}: energy {got['energy']!r} vs mace-torch {ref['energy']!r}"
            assert_close(got["forces"], ref["forces"], FORCE_ATOL, what + ": forces")
            if kind == "bulk":
                assert_close(got["stress"], ref["stress"], STRESS_ATOL, what + ": stress")
    if spec["pair_repulsion"]:  # the comparison must exercise the ZBL term, not only switch it on
        assert pair_energy > 1e-3, f"{preset}: the structures never reach the ZBL range (test design)"


def test_torch_model_option_saves_the_model_that_was_exported(tmp_path):
    """make_random_model.py --torch-model (what bench/fastmace_structures.py hands to FastMACE): the
    saved mace-torch model, loaded back, gives the exported file's energy and forces (float64)."""
    out, saved = tmp_path / "model.safetensors", tmp_path / "model.model"
    assert make_random_model.main(["tiny-mh1", str(out), "--seed", "3", "--torch-model", str(saved)]) == 0
    model = torch.load(saved, weights_only=False)
    atoms = bulk(np.random.default_rng(3), [28, 29])
    ref = mace_outputs(model, atoms, [28, 29])
    xyz = tmp_path / "bulk.xyz"
    write_xyz(xyz, atoms)
    got = flashmace(out, xyz, "reference", "tiny-mh1 --torch-model")
    assert np.isfinite(got["energy"]) and abs(got["energy"] - ref["energy"]) <= ENERGY_RTOL * abs(ref["energy"])
    assert_close(got["forces"], ref["forces"], FORCE_ATOL, "tiny-mh1 --torch-model: forces")
