"""Live comparison with official MACE (mace-torch from the venv): randomly drawn ScaleShiftMACE
models and structures, evaluated by MACE and by flashmace-eval on the exported file.

Seeded: case k uses numpy seed 1000 + k for hyperparameters, weights and structures, so a failure
reproduces with `pytest -k "case_k"`. Tolerances are the reference-path acceptance criteria
(float64: energy 1e-12 relative, per-atom energies, forces and stress 1e-10 absolute; float32:
energy 1e-5 relative)."""
import json
import os
import subprocess

import numpy as np
import pytest

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
torch = pytest.importorskip("torch")
ase = pytest.importorskip("ase")
from e3nn import o3  # noqa: E402
from mace import data as mace_data  # noqa: E402
from mace import modules  # noqa: E402
from mace.tools import torch_geometric, utils  # noqa: E402

import export_mace  # noqa: E402

EVAL = os.environ["FLASHMACE_EVAL"]
NUM_CASES = 24
# Variants cycle so that every block class and radial option is covered by several cases.
VARIANTS = ["residual", "non-residual first", "density", "density+zbl+agnesi", "zbl+soft", "residual+agnesi"]


def draw_model(rng):
    variant = VARIANTS[rng.integers(0, 10**6) % len(VARIANTS)]
    max_L = int(rng.integers(0, 3))
    channels = int(rng.choice([4, 6, 8]))
    hidden = "+".join(f"{channels}x{l}{'e' if l % 2 == 0 else 'o'}" for l in range(max_L + 1))
    zs = sorted(int(z) for z in rng.choice(np.arange(1, 41), size=int(rng.integers(1, 6)), replace=False))
    first, rest = "RealAgnosticResidualInteractionBlock", "RealAgnosticResidualInteractionBlock"
    if variant == "non-residual first":
        first = "RealAgnosticInteractionBlock"
    if variant.startswith("density"):
        first, rest = "RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock"
    transform = "Agnesi" if "agnesi" in variant else "Soft" if "soft" in variant else "None"
    hp = dict(
        r_max=float(rng.uniform(3.0, 5.5)), num_bessel=int(rng.integers(4, 11)),
        num_polynomial_cutoff=int(rng.integers(3, 7)), max_ell=int(rng.integers(2, 4)),
        interaction_cls=modules.interaction_classes[rest], interaction_cls_first=modules.interaction_classes[first],
        num_interactions=int(rng.integers(2, 4)), num_elements=len(zs), hidden_irreps=o3.Irreps(hidden),
        MLP_irreps=o3.Irreps(f"{int(rng.choice([4, 8]))}x0e"), atomic_energies=rng.uniform(-5, 0, len(zs)),
        avg_num_neighbors=float(rng.uniform(2, 20)), atomic_numbers=zs, correlation=int(rng.integers(1, 4)),
        gate=torch.nn.functional.silu, radial_MLP=[int(rng.choice([8, 16])) for _ in range(rng.integers(1, 4))],
        atomic_inter_scale=float(rng.uniform(0.5, 2.0)), atomic_inter_shift=float(rng.uniform(-1, 1)),
        pair_repulsion="zbl" in variant, distance_transform=transform)
    torch.manual_seed(int(rng.integers(0, 2**31)))
    model = modules.ScaleShiftMACE(**hp)
    with torch.no_grad():  # MACE zero-initialises some weights: redraw all so every path counts
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model, hp, variant


def draw_structure(rng, zs, periodic):
    n = int(rng.integers(4, 13)) if periodic else int(rng.integers(3, 9))
    side = (n * 12.0) ** (1 / 3)  # ~12 A^3 per atom
    cell = side * (np.eye(3) + 0.1 * rng.uniform(-1, 1, (3, 3))) if periodic else np.zeros((3, 3))
    positions = []
    while len(positions) < n:  # rejection sampling keeps every pair (and image) >= 0.9 A apart
        frac = rng.uniform(0, 1, 3)
        p = frac @ cell if periodic else rng.uniform(0, side, 3)
        trial = ase.Atoms(positions=np.array(positions + [p]), cell=cell, pbc=periodic)
        if len(trial) == 1 or trial.get_all_distances(mic=periodic)[-1, :-1].min() >= 0.9:
            positions.append(p)
    numbers = rng.choice(zs, size=n)
    return ase.Atoms(numbers=numbers, positions=np.array(positions), cell=cell, pbc=periodic)


def mace_outputs(model, atoms, r_max, zs):
    config = mace_data.config_from_atoms(atoms)
    data = mace_data.AtomicData.from_config(config, z_table=utils.AtomicNumberTable(zs), cutoff=r_max)
    batch = next(iter(torch_geometric.dataloader.DataLoader([data], batch_size=1)))
    out = model(batch.to_dict(), compute_stress=bool(atoms.pbc.all()), training=False)
    result = {k: out[k].detach().numpy() for k in ("energy", "node_energy", "forces")}
    if atoms.pbc.all():
        result["stress"] = out["stress"].detach().numpy()[0]
    return result


def write_xyz(path, atoms):
    lines = [str(len(atoms))]
    header = "Properties=species:S:1:pos:R:3"
    if atoms.pbc.all():
        header = 'Lattice="%s" pbc="T T T" ' % " ".join(repr(float(x)) for x in atoms.cell.array.ravel()) + header
    lines.append(header)
    for s, p in zip(atoms.get_chemical_symbols(), atoms.positions):
        lines.append("%s %r %r %r" % (s, float(p[0]), float(p[1]), float(p[2])))
    path.write_text("\n".join(lines) + "\n")


def flashmace(model_path, xyz, dtype):
    proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), "--dtype", dtype],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("case", [f"case_{k}" for k in range(NUM_CASES)])
def test_random_model_matches_official_mace(tmp_path, case):
    seed = 1000 + int(case.split("_")[1])
    rng = np.random.default_rng(seed)
    torch.set_default_dtype(torch.float64)
    model, hp, variant = draw_model(rng)
    model_path = tmp_path / "model.safetensors"
    export_mace.export_model(model, model_path)
    where = f"seed {seed}, {variant}, hidden {hp['hidden_irreps']}, max_ell {hp['max_ell']}, " \
            f"correlation {hp['correlation']}, {hp['num_interactions']} layers, Z {hp['atomic_numbers']}"
    for periodic in (True, False):
        atoms = draw_structure(rng, hp["atomic_numbers"], periodic)
        ref = mace_outputs(model, atoms, hp["r_max"], hp["atomic_numbers"])
        xyz = tmp_path / f"structure_{periodic}.xyz"
        write_xyz(xyz, atoms)
        got = flashmace(model_path, xyz, "float64")
        label = f"{where}, {'periodic' if periodic else 'cluster'} of {len(atoms)} atoms"
        e_ref = float(ref["energy"][0])
        assert abs(got["energy"] - e_ref) <= 1e-12 * abs(e_ref), label
        np.testing.assert_allclose(got["node_energy"], ref["node_energy"], rtol=0, atol=1e-10, err_msg=label)
        np.testing.assert_allclose(got["forces"], ref["forces"], rtol=0, atol=1e-10, err_msg=label)
        if periodic:
            np.testing.assert_allclose(got["stress"], ref["stress"], rtol=0, atol=1e-10, err_msg=label)
        got32 = flashmace(model_path, xyz, "float32")
        assert abs(got32["energy"] - e_ref) <= 1e-5 * abs(e_ref), label + " (float32)"
