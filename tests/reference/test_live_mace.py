"""Live comparison with official MACE (mace-torch from the venv): randomly drawn ScaleShiftMACE
models and structures, evaluated by MACE itself and by flashmace-eval on the exported file.

Case k uses numpy seed 1000 + k for hyperparameters, weights and structures (printed in every
failure message), so a failure reproduces with `pytest -k case_k`. The model options cycle so
that the first 18 cases cover every combination of
  first/later interaction block: residual/residual, non-residual/residual, Density/DensityResidual,
  distance transform: none, Agnesi, Soft,
  ZBL pair repulsion: off, on;
the other hyperparameters are drawn at random: hidden irreps max_L 0-2 with 4-16 channels, max_ell
2-3, correlation 1-3 (a per-layer list in a quarter of the cases), 2-3 interactions, 1-5 random
elements, radial MLP, Bessel and cutoff-polynomial sizes, r_max 3-6, avg_num_neighbors (per layer
in a quarter of the cases), E0s, scale and shift. Every weight is redrawn from N(0, 1) (the first
radial-MLP layer of non-Density blocks from N(0, 9)): MACE zero-initialises some.

Structures per case: a periodic triclinic cell (4-20 atoms, often smaller than r_max, so many
images), a non-periodic cluster (sometimes written with a Lattice and pbc="F F F"), and in two
cases out of five a slab (pbc="T T F", tilted non-periodic vector). No pair is closer than 0.8 A.

Tolerances are the reference-path acceptance criteria, against MACE in float64: energy 1e-12
relative, per-atom energies, forces and stress (fully periodic) 1e-10 absolute; and
flashmace-eval --dtype float32 energy (periodic structure) 1e-5 relative.

Slab stress has no common convention: MACE 0.3.15 divides the virial by the volume of a cell whose
non-periodic vector it has replaced by (max |position| + 1) x 5 r_max along that axis (its
neighbour-list padding, mace/data/neighborhood.py), flashmace-eval by |det| of the written cell. The
virial they divide (stress x volume) is compared instead, at the stress tolerance times
flashmace's volume."""
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
from mace.modules import symmetric_contraction  # noqa: E402
from mace.tools import torch_geometric, utils  # noqa: E402

import export_mace  # noqa: E402

EVAL = os.environ["FLASHMACE_EVAL"]
NUM_CASES = 24
BLOCKS = [("RealAgnosticResidualInteractionBlock", "RealAgnosticResidualInteractionBlock"),
          ("RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock"),
          ("RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock")]
TRANSFORMS = ["None", "Agnesi", "Soft"]
MAX_Z = 86  # elements with tabulated covalent radii (used by ZBL and the distance transforms)
MIN_DISTANCE = 0.8
ATOM_VOLUME = 12.0  # A^3 per atom in the random structures

# Speed only: MACE recomputes the symmetric-contraction coupling tensors (U_matrix_real, e3nn
# Wigner products, seconds each for correlation 3) for every product block of every model. They are
# a deterministic function of the arguments, so compute each once and hand MACE a fresh copy.
_U_CACHE = {}
_U_matrix_real = symmetric_contraction.U_matrix_real


def _cached_U_matrix_real(*args, **kwargs):
    key = (tuple(str(a) for a in args), tuple(sorted((k, str(v)) for k, v in kwargs.items())))
    if key not in _U_CACHE:
        _U_CACHE[key] = _U_matrix_real(*args, **kwargs)
    return [x.clone() if torch.is_tensor(x) else x for x in _U_CACHE[key]]


symmetric_contraction.U_matrix_real = _cached_U_matrix_real
torch.set_num_threads(1)  # tiny graphs: threads only add overhead, and the test shares 2 cores


def variant(k):
    """(first block, later block, distance transform, ZBL) of case k; all 18 combinations in k < 18."""
    first, rest = BLOCKS[k % 3]
    return first, rest, TRANSFORMS[(k // 3) % 3], bool(k % 2)


# Further options, on case subsets that meet every block class and both ZBL settings.
def per_layer_correlation(k):
    return k % 8 in (0, 5)


def per_layer_avg_num_neighbors(k):
    return k % 8 in (2, 7)


def with_slab(k):
    return k % 5 in (1, 3)


def draw_model(k, rng):
    first, rest, transform, zbl = variant(k)
    layers = int(rng.integers(2, 4))
    max_L = int(rng.integers(0, 3))
    channels = int(rng.choice([4, 6, 8, 12, 16]))
    hidden = "+".join(f"{channels}x{l}{'e' if l % 2 == 0 else 'o'}" for l in range(max_L + 1))
    zs = sorted(int(z) for z in rng.choice(np.arange(1, MAX_Z + 1), size=int(rng.integers(1, 6)), replace=False))
    if per_layer_correlation(k):  # per-layer correlation orders (MACE accepts a list)
        correlation = [int(c) for c in rng.integers(1, 4, size=layers)]
        if len(set(correlation)) == 1:
            correlation[-1] = correlation[-1] % 3 + 1
    else:
        correlation = int(rng.integers(1, 4))
    if channels == 16 and len(zs) == 1 and max_L > 0 and 1 in np.atleast_1d(correlation):
        # mace-torch 0.3.15 itself cannot evaluate this model: SymmetricContraction.forward's final
        # out.view() fails on the non-contiguous einsum result (correlation 1, one element, 16 channels).
        channels = 12
        hidden = hidden.replace("16x", "12x")
    r_max = float(rng.uniform(3.0, 6.0))
    neighbours = 4 / 3 * np.pi * r_max**3 / ATOM_VOLUME  # expected in the structures drawn below
    hp = dict(
        r_max=r_max, num_bessel=int(rng.integers(4, 11)),
        num_polynomial_cutoff=int(rng.integers(3, 7)), max_ell=int(rng.integers(2, 4)),
        interaction_cls=modules.interaction_classes[rest], interaction_cls_first=modules.interaction_classes[first],
        num_interactions=layers, num_elements=len(zs), hidden_irreps=o3.Irreps(hidden),
        MLP_irreps=o3.Irreps(f"{int(rng.choice([4, 8, 16]))}x0e"), atomic_energies=rng.uniform(-5, 0, len(zs)),
        avg_num_neighbors=float(neighbours * rng.uniform(0.3, 1.5)), atomic_numbers=zs, correlation=correlation,
        gate=torch.nn.functional.silu, radial_MLP=[int(rng.choice([8, 16, 32])) for _ in range(rng.integers(1, 4))],
        atomic_inter_scale=float(rng.uniform(0.5, 2.0)), atomic_inter_shift=float(rng.uniform(-1, 1)),
        pair_repulsion=zbl, distance_transform=transform)
    torch.manual_seed(int(rng.integers(0, 2**31)))
    model = modules.ScaleShiftMACE(**hp)
    with torch.no_grad():  # MACE zero-initialises some weights: redraw all so every path counts
        for p in model.parameters():
            p.normal_(0.0, 1.0)
        for block in model.interactions:
            # MACE's Bessel features are ~0.1 and the blocks without a density normalisation divide the
            # messages by avg_num_neighbors: a wider first radial layer keeps the messages from being a
            # small perturbation on the self-connection (forces ~0.1 eV/A rather than ~0.01).
            if not hasattr(block, "density_fn"):
                block.conv_tp_weights.layer0.weight.mul_(3.0)
    if per_layer_avg_num_neighbors(k):  # per-layer normalisation (MACE stores one value per interaction block)
        for block in model.interactions:
            block.avg_num_neighbors = float(neighbours * rng.uniform(0.3, 1.5))
    model.eval()
    return model, hp


def place_atoms(rng, n, sample, cell, pbc):
    """Rejection sampling: every pair (nearest periodic image included) at least MIN_DISTANCE apart."""
    positions = []
    while len(positions) < n:
        trial = ase.Atoms(positions=np.array(positions + [sample()]), cell=cell, pbc=pbc)
        if len(trial) == 1 or trial.get_all_distances(mic=any(pbc))[-1, :-1].min() >= MIN_DISTANCE:
            positions = list(trial.positions)
    return np.array(positions)


def draw_structure(rng, zs, kind):
    """kind: 'periodic', 'cluster' or 'slab'. Returns (ase.Atoms, cell written for a cluster or None)."""
    n = int(rng.integers(4, 21)) if kind != "cluster" else int(rng.integers(3, 13))
    side = (n * ATOM_VOLUME) ** (1 / 3)
    written_cell = None
    if kind == "periodic":
        cell = side * (np.eye(3) + 0.25 * rng.uniform(-1, 1, (3, 3)))
        pbc = (True, True, True)
        pos = place_atoms(rng, n, lambda: rng.uniform(0, 1, 3) @ cell, cell, pbc)
    elif kind == "slab":
        cell = side * (np.eye(3) + 0.25 * rng.uniform(-1, 1, (3, 3)))
        cell[:2, 2] = 0.0  # in-plane lattice vectors; the third one is tilted and not periodic
        cell[2] = side * np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 1.0])
        pbc = (True, True, False)
        pos = place_atoms(rng, n, lambda: np.append(rng.uniform(0, 1, 2) @ cell[:2, :2], rng.uniform(0, side)),
                          cell, pbc)
    else:
        cell = np.zeros((3, 3))
        pbc = (False, False, False)
        pos = place_atoms(rng, n, lambda: rng.uniform(0, side, 3), cell, pbc)
        if rng.uniform() < 0.5:  # a Lattice that must be ignored: periodic images would be within r_max
            written_cell = 2.5 * (np.eye(3) + 0.1 * rng.uniform(-1, 1, (3, 3)))
    atoms = ase.Atoms(numbers=rng.choice(zs, size=n), positions=pos, cell=cell, pbc=pbc)
    return atoms, written_cell


def mace_outputs(model, atoms, r_max, zs):
    """MACE's own data path (config_from_atoms -> AtomicData with MACE's neighbour list -> batch); the
    structure's total charge, spin and electronic temperature from atoms.info (charge, spin, elec_temp)."""
    keys = mace_data.KeySpecification(info_keys={"total_charge": "charge", "total_spin": "spin",
                                                 "elec_temp": "elec_temp"})
    config = mace_data.config_from_atoms(atoms, key_specification=keys)
    data = mace_data.AtomicData.from_config(config, z_table=utils.AtomicNumberTable(zs), cutoff=r_max)
    batch = next(iter(torch_geometric.dataloader.DataLoader([data], batch_size=1)))
    pair = []
    hook = model.pair_repulsion_fn.register_forward_hook(lambda m, i, o: pair.append(o.detach())) \
        if hasattr(model, "pair_repulsion_fn") else None
    try:
        out = model(batch.to_dict(), compute_stress=bool(atoms.pbc.any()), training=False)
    finally:
        if hook is not None:
            hook.remove()
    result = {k: out[k].detach().numpy() for k in ("energy", "node_energy", "forces")}
    if atoms.pbc.any():
        result["stress"] = out["stress"].detach().numpy()[0]
        result["stress_volume"] = abs(float(np.linalg.det(batch["cell"].view(3, 3).numpy())))
    result["pair_energy"] = float(pair[0].abs().sum()) if pair else 0.0
    result["edges"] = int(data.edge_index.shape[1])
    return result


def write_xyz(path, atoms, written_cell=None):
    lines = [str(len(atoms))]
    header = "Properties=species:S:1:pos:R:3"
    cell = atoms.cell.array if atoms.pbc.any() else written_cell
    if cell is not None:
        header = 'Lattice="%s" pbc="%s" ' % (" ".join(repr(float(x)) for x in np.ravel(cell)),
                                             " ".join("T" if p else "F" for p in atoms.pbc)) + header
    lines.append(header)
    for s, p in zip(atoms.get_chemical_symbols(), atoms.positions):
        lines.append("%s %r %r %r" % (s, float(p[0]), float(p[1]), float(p[2])))
    path.write_text("\n".join(lines) + "\n")


def flashmace(model_path, xyz, dtype, label, path=("--path", "reference")):
    proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), "--dtype", dtype, *path],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"{label} ({dtype}): flashmace-eval failed: {proc.stderr}"
    return json.loads(proc.stdout)


def assert_matches_mace(got, ref, atoms, what):
    """flashmace-eval's float64 outputs against MACE's: energy 1e-12 relative; per-atom energies,
    forces and stress (a slab's virial) 1e-10."""
    e_ref = float(ref["energy"][0])
    assert abs(got["energy"] - e_ref) <= 1e-12 * abs(e_ref), f"{what}: energy {got['energy']!r} vs MACE {e_ref!r}"
    np.testing.assert_allclose(got["node_energy"], ref["node_energy"], rtol=0, atol=1e-10,
                               err_msg=what + ": node energies")
    np.testing.assert_allclose(got["forces"], ref["forces"], rtol=0, atol=1e-10, err_msg=what + ": forces")
    if atoms.pbc.all():
        np.testing.assert_allclose(got["stress"], ref["stress"], rtol=0, atol=1e-10, err_msg=what + ": stress")
    elif atoms.pbc.any():
        volume = abs(np.linalg.det(atoms.cell.array))
        np.testing.assert_allclose(np.array(got["stress"]) * volume, ref["stress"] * ref["stress_volume"],
                                   rtol=0, atol=1e-10 * volume, err_msg=what + ": slab virial")


@pytest.mark.parametrize("k", range(NUM_CASES), ids=lambda k: f"case_{k}")
def test_random_model_matches_official_mace(tmp_path, k):
    seed = 1000 + k
    rng = np.random.default_rng(seed)
    torch.set_default_dtype(torch.float64)
    model, hp = draw_model(k, rng)
    model_path = tmp_path / "model.safetensors"
    export_mace.export_model(model, model_path)
    avg = [round(float(b.avg_num_neighbors), 3) for b in model.interactions]
    where = (f"seed {seed}: {hp['interaction_cls_first'].__name__}/{hp['interaction_cls'].__name__}, "
             f"transform {hp['distance_transform']}, ZBL {hp['pair_repulsion']}, hidden {hp['hidden_irreps']}, "
             f"max_ell {hp['max_ell']}, correlation {hp['correlation']}, {hp['num_interactions']} layers, "
             f"Z {hp['atomic_numbers']}, r_max {hp['r_max']:.3f}, avg_num_neighbors {avg}")
    kinds = ["periodic", "cluster"] + (["slab"] if with_slab(k) else [])
    pair_energy = 0.0
    for kind in kinds:
        atoms, written_cell = draw_structure(rng, hp["atomic_numbers"], kind)
        ref = mace_outputs(model, atoms, hp["r_max"], hp["atomic_numbers"])
        pair_energy += ref["pair_energy"]
        xyz = tmp_path / f"{kind}.xyz"
        write_xyz(xyz, atoms, written_cell)
        label = f"{where}; {kind} of {len(atoms)} atoms, {ref['edges']} edges"

        e_ref = float(ref["energy"][0])
        # Both paths; the fast one alternately with the planner's chunks and with 7-edge chunks.
        fast = ("--path", "fast") + (("--edge-chunk", "7", "--atom-chunk", "5") if k % 2 else ())
        for path in (("--path", "reference"), fast):
            assert_matches_mace(flashmace(model_path, xyz, "float64", label, path), ref, atoms,
                                f"{label} [{' '.join(path)}]")

        # Test design: the interaction must move the atoms measurably, or the 1e-10 checks say little.
        assert np.abs(ref["forces"]).max() > 1e-3, f"{label}: MACE forces are negligible (test design)"

        if kind == "periodic":  # one float32 run per case (each flashmace-eval start costs ~1 s)
            got32 = flashmace(model_path, xyz, "float32", label, ("--path", "fast"))
            assert abs(got32["energy"] - e_ref) <= 1e-5 * abs(e_ref), \
                f"{label} (float32): energy {got32['energy']!r} vs MACE float64 {e_ref!r}"
    if hp["pair_repulsion"]:  # the comparison must exercise the ZBL term, not only switch it on
        assert pair_energy > 1e-3, f"{where}: the structures never reach the ZBL range (test design)"


# The newer architecture (MACE-MH-1, OMOL): RealAgnosticResidualNonLinearInteractionBlock, conv TPs on
# edge irreps narrower than the hidden irreps, one symmetric-contraction weight set for all elements,
# the envelope applied inside the interactions. These options also combine with the older blocks
# (the last cases). Options per case: (blocks, edge irreps "channels x (0e+1o)" or None, use them in
# the first layer, agnostic product, apply_cutoff).
NONLINEAR = "RealAgnosticResidualNonLinearInteractionBlock"
NONLINEAR_CASES = [
    ((NONLINEAR, NONLINEAR), 4, True, True, False),   # MH-1's options
    ((NONLINEAR, NONLINEAR), 6, False, False, False),
    ((NONLINEAR, NONLINEAR), None, False, True, True),
    ((NONLINEAR, NONLINEAR), None, False, False, False),
    ((NONLINEAR, NONLINEAR), 8, True, False, True),
    ((NONLINEAR, NONLINEAR), 4, False, True, False),
    (BLOCKS[0], 4, True, True, False),
    (BLOCKS[1], None, False, False, False),
    (BLOCKS[2], 6, False, True, False),
]


def draw_nonlinear_model(j, rng):
    (first, rest), edge_channels, edge_first, agnostic, apply_cutoff = NONLINEAR_CASES[j]
    layers = int(rng.integers(2, 4))
    channels = int(rng.choice([4, 8, 12]))
    max_L = int(rng.integers(1, 3))
    hidden = "+".join(f"{channels}x{l}{'e' if l % 2 == 0 else 'o'}" for l in range(max_L + 1))
    # light elements: ZBL between heavy nuclei 0.8 A apart gives forces of 1e4 eV/A, where 1e-10
    # absolute is below float64 round-off
    zs = sorted(int(z) for z in rng.choice(np.arange(1, 31), size=int(rng.integers(2, 5)), replace=False))
    r_max = float(rng.uniform(3.5, 6.0))
    neighbours = 4 / 3 * np.pi * r_max**3 / ATOM_VOLUME
    hp = dict(
        r_max=r_max, num_bessel=int(rng.integers(4, 11)), num_polynomial_cutoff=int(rng.integers(3, 7)),
        max_ell=int(rng.integers(2, 4)), interaction_cls=modules.interaction_classes[rest],
        interaction_cls_first=modules.interaction_classes[first], num_interactions=layers, num_elements=len(zs),
        hidden_irreps=o3.Irreps(hidden), MLP_irreps=o3.Irreps(f"{int(rng.choice([4, 8]))}x0e"),
        atomic_energies=rng.uniform(-5, 0, len(zs)), avg_num_neighbors=float(neighbours * rng.uniform(0.3, 1.5)),
        atomic_numbers=zs, correlation=int(rng.integers(1, 4)), gate=torch.nn.functional.silu,
        radial_MLP=[int(rng.choice([8, 16])) for _ in range(rng.integers(1, 4))],
        atomic_inter_scale=float(rng.uniform(0.5, 2.0)), atomic_inter_shift=float(rng.uniform(-1, 1)),
        pair_repulsion=bool(j % 2), distance_transform=TRANSFORMS[j % 3], apply_cutoff=apply_cutoff,
        use_agnostic_product=agnostic, use_edge_irreps_first=edge_first,
        edge_irreps=o3.Irreps(f"{edge_channels}x0e+{edge_channels}x1o") if edge_channels else None)
    if layers == 3 and hp["correlation"] == 3:  # (3^3-fold powers of the embedding: energies of 1e20)
        hp["correlation"] = 2
    torch.manual_seed(int(rng.integers(0, 2**31)))
    return random_weights(modules.ScaleShiftMACE(**hp), rng), hp


def random_weights(model, rng):
    """Every parameter redrawn from N(0, 1), then scaled where N(0, 1) weights would make energies of
    1e20 (the newer architecture's cases: forces of at most ~1e2 eV/A, where 1e-10 is float64 round-off)."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 1.0)
        for block in model.interactions:
            if hasattr(block, "alpha"):
                # density normalisation alpha + beta * density with density >= 0: keep it away from 0
                block.alpha.fill_(float(rng.uniform(2.0, 4.0)))
                block.beta.fill_(float(rng.uniform(0.5, 1.5)))
                # torch.nn.Linear does not normalise by its fan-in as e3nn's layers do: N(0, 1/fan_in),
                # or the messages grow by sqrt(64) per layer and the energies reach 1e20
                for mlp in (block.conv_tp_weights, block.density_fn):
                    for layer in mlp.net:
                        if isinstance(layer, torch.nn.Linear):
                            layer.weight.mul_(layer.in_features ** -0.5)
            elif not hasattr(block, "density_fn"):
                block.conv_tp_weights.layer0.weight.mul_(3.0)
        # No avg_num_neighbors division keeps features O(1) here, and a correlation-3 product cubes
        # them in every layer: smaller product weights keep 3-layer models below ~1e3 eV/A.
        for product in model.products:
            for name, p in product.named_parameters():
                if "symmetric_contractions" in name:
                    p.mul_(0.3)
        if hasattr(model, "joint_embedding"):  # (the per-structure embedding is added to the features)
            model.joint_embedding.project[0].weight.mul_(0.3)
    model.eval()
    return model


@pytest.mark.parametrize("j", range(len(NONLINEAR_CASES)), ids=lambda j: f"nonlinear_{j}")
def test_nonlinear_architecture_matches_official_mace(tmp_path, j):
    seed = 2000 + j
    rng = np.random.default_rng(seed)
    torch.set_default_dtype(torch.float64)
    model, hp = draw_nonlinear_model(j, rng)
    model_path = tmp_path / "model.safetensors"
    meta = export_mace.export_model(model, model_path)
    assert meta["apply_cutoff"] == hp["apply_cutoff"] and meta["use_agnostic_product"] == hp["use_agnostic_product"]
    where = (f"seed {seed}: {hp['interaction_cls_first'].__name__}/{hp['interaction_cls'].__name__}, "
             f"edge irreps {hp['edge_irreps']} (first layer: {hp['use_edge_irreps_first']}), agnostic product "
             f"{hp['use_agnostic_product']}, apply_cutoff {hp['apply_cutoff']}, transform {hp['distance_transform']}, "
             f"ZBL {hp['pair_repulsion']}, hidden {hp['hidden_irreps']}, max_ell {hp['max_ell']}, correlation "
             f"{hp['correlation']}, {hp['num_interactions']} layers, Z {hp['atomic_numbers']}, r_max {hp['r_max']:.3f}")
    for kind in ("periodic", "cluster", "slab"):
        atoms, written_cell = draw_structure(rng, hp["atomic_numbers"], kind)
        ref = mace_outputs(model, atoms, hp["r_max"], hp["atomic_numbers"])
        xyz = tmp_path / f"{kind}.xyz"
        write_xyz(xyz, atoms, written_cell)
        label = f"{where}; {kind} of {len(atoms)} atoms, {ref['edges']} edges"
        e_ref = float(ref["energy"][0])
        # Both paths; the fast one alternately with the planner's chunks and with 7-edge chunks
        # (several chunks per receiver, streamed density sums), radial pairs asked for (they must not
        # apply: these MLPs read the edge's elements).
        fast = ("--path", "fast", "--radial-pairs", "on") + (("--edge-chunk", "7", "--atom-chunk", "5") if j % 2 else ())
        for path in (("--path", "reference"), fast):
            assert_matches_mace(flashmace(model_path, xyz, "float64", label, path), ref, atoms,
                                f"{label} [{' '.join(path)}]")
        assert 1e-3 < np.abs(ref["forces"]).max() < 1e3, f"{label}: MACE forces {np.abs(ref['forces']).max()} (test design)"
        if kind == "periodic":
            got32 = flashmace(model_path, xyz, "float32", label, ("--path", "fast"))
            assert abs(got32["energy"] - e_ref) <= 1e-5 * abs(e_ref), \
                f"{label} (float32): energy {got32['energy']!r} vs MACE float64 {e_ref!r}"


# Per-structure inputs embedded into the atoms' features (mace-torch's embedding_specs: MACE-OMOL's total
# charge and spin, and a continuous electronic temperature), with and without the embedding readout,
# on NonLinear and residual blocks: both paths equal mace-torch for several values and for none given
# (mace-torch's defaults: charge 0, spin 1, elec_temp 0). Per-atom energies include the embedding
# readout's energy (mace-torch adds it to the total only): they differ from mace-torch's by one constant
# per element, and sum to the energy.
EMBEDDINGS = {
    "total_charge": {"type": "categorical", "per": "graph", "emb_dim": 8, "num_classes": 11, "offset": 5},
    "total_spin": {"type": "categorical", "per": "graph", "emb_dim": 6, "num_classes": 7, "offset": 0},
    "elec_temp": {"type": "continuous", "per": "graph", "in_dim": 1, "emb_dim": 5},
}
SYSTEM_CASES = [  # (blocks, embeddings, embedding readout, values tried: (charge, spin, elec_temp) or None)
    ((NONLINEAR, NONLINEAR), ("total_charge", "total_spin"), True, [None, (1, 2, None), (-3, 5, None)]),
    (BLOCKS[0], ("total_spin", "elec_temp", "total_charge"), False, [(2, 1, 0.3), (0, 3, 1.5)]),
    (BLOCKS[2], ("elec_temp",), True, [None, (None, None, 0.8)]),
]


@pytest.mark.parametrize("j", range(len(SYSTEM_CASES)), ids=lambda j: f"system_{j}")
def test_system_embeddings_match_official_mace(tmp_path, j):
    (first, rest), names, readout, values = SYSTEM_CASES[j]
    rng = np.random.default_rng(3000 + j)
    torch.set_default_dtype(torch.float64)
    zs = [1, 6, 8]
    hp = dict(r_max=4.5, num_bessel=6, num_polynomial_cutoff=5, max_ell=2,
              interaction_cls=modules.interaction_classes[rest], interaction_cls_first=modules.interaction_classes[first],
              num_interactions=2, num_elements=3, hidden_irreps=o3.Irreps("8x0e+8x1o"), MLP_irreps=o3.Irreps("4x0e"),
              atomic_energies=rng.uniform(-5, 0, 3), avg_num_neighbors=8.0, atomic_numbers=zs, correlation=2,
              gate=torch.nn.functional.silu, radial_MLP=[16, 16], atomic_inter_scale=1.3, atomic_inter_shift=0.2,
              embedding_specs={n: EMBEDDINGS[n] for n in names}, use_embedding_readout=readout)
    torch.manual_seed(int(rng.integers(0, 2**31)))
    model = random_weights(modules.ScaleShiftMACE(**hp), rng)
    model_path = tmp_path / "model.safetensors"
    meta = export_mace.export_model(model, model_path)
    assert [e["name"] for e in meta["system_embeddings"]] == list(names) and meta["embedding_readout"] == readout
    energies = set()
    for kind in ("periodic", "cluster"):
        atoms, written_cell = draw_structure(rng, zs, kind)
        xyz = tmp_path / f"{kind}.xyz"
        write_xyz(xyz, atoms, written_cell)
        species = np.array(atoms.numbers)
        for given in values:
            flags = ()
            atoms.info.clear()
            for key, value in zip(("charge", "spin", "elec_temp"), given or (None, None, None)):
                if value is not None and {"charge": "total_charge", "spin": "total_spin"}.get(key, key) in names:
                    atoms.info[key] = value
                    flags += (f"--{key.replace('_', '-')}", str(value))
            ref = mace_outputs(model, atoms, hp["r_max"], zs)
            e_ref = float(ref["energy"][0])
            energies.add(round(e_ref, 9))
            assert 1e-3 < np.abs(ref["forces"]).max() < 1e3, f"MACE forces {np.abs(ref['forces']).max()} (test design)"
            for path in ("reference", "fast"):
                what = f"system_{j} {kind} {dict(atoms.info)} --path {path}"
                got = flashmace(model_path, xyz, "float64", what, ("--path", path) + flags)
                assert abs(got["energy"] - e_ref) <= 1e-12 * abs(e_ref), f"{what}: energy {got['energy']!r} vs {e_ref!r}"
                np.testing.assert_allclose(got["forces"], ref["forces"], rtol=0, atol=1e-10, err_msg=what + ": forces")
                if atoms.pbc.all():
                    np.testing.assert_allclose(got["stress"], ref["stress"], rtol=0, atol=1e-10, err_msg=what + ": stress")
                node = np.asarray(got["node_energy"])
                assert abs(node.sum() - e_ref) <= 1e-10 * max(1.0, abs(e_ref)), f"{what}: node energies sum"
                offset = node - ref["node_energy"]
                for z in set(species):  # one constant per element: the embedding readout's energy
                    assert np.ptp(offset[species == z]) <= 1e-10, f"{what}: node energies of Z={z}"
                if not readout:
                    np.testing.assert_allclose(node, ref["node_energy"], rtol=0, atol=1e-10, err_msg=what)
    assert len(energies) == len(values) * 2, "the inputs must change the energy (test design)"
    # A value outside the model's classes, or for an input it does not read, stops with the reason.
    if "total_charge" in names:
        proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), "--charge", "9"],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and "total_charge 9 is not one of its values (the integers -5 to 5)" in proc.stderr, proc.stderr
    else:
        proc = subprocess.run([EVAL, "--model", str(model_path), "--xyz", str(xyz), "--charge", "1"],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and "does not read total_charge" in proc.stderr and "charge keyword" in proc.stderr, proc.stderr
