"""The Cu-Ni EAM data set (tools/make_cuni_data.py, smoke plan): reproducible from its seed, split
by trajectory, and labelled with what mace-torch expects: forces = -dE/dx and stress =
(1/V) dE/dstrain in eV/A^3, checked by finite differences of LAMMPS energies, and read by
mace-torch's own loader into the same 3x3 tensor."""
import filecmp
import json
import os

import numpy as np
import pytest
from cuni import extxyz
from cuni.lammps_eam import Trajectory, run_trajectories
from cuni.plan import smoke_plan
from cuni.structures import Structure, strained
from cuni_harness import eam_file, eam_lmp, run_tool

SEED = 2024
# Central differences with step H: the truncation error is O(H^2) (~1e-10 here); rounding is
# ~1e-14 eV of a 100 eV energy over 2H, ~1e-9 eV/A. Labels must match to far below the
# thermal forces (~0.5 eV/A) and stresses (~1e-2 eV/A^3) they describe.
H_STRAIN = 1e-5
H_DISPLACEMENT = 1e-5  # A
STRESS_TOLERANCE = 1e-7  # eV/A^3 (0.016 MPa)
FORCE_TOLERANCE = 1e-6  # eV/A


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    run_tool("make_cuni_data.py", str(out), "--plan", "smoke", "--seed", str(SEED), "--jobs", "2",
             "--lmp", eam_lmp(), "--eam", eam_file())
    return out


def _configs(data_dir):
    return {split: extxyz.read(os.path.join(data_dir, f"{split}.xyz")) for split in ("train", "valid", "test")}


def _structure(conf):
    return Structure(conf["species"], conf["positions"], conf["cell"])


def _energies(structures, workdir):
    """EAM energies of structures as given (no MD), through the generator's own LAMMPS path."""
    trajs = [Trajectory(f"fd{i:03d}", "fd", s, 0.0, 1, 0, 0, 1) for i, s in enumerate(structures)]
    frames = run_trajectories(trajs, str(workdir), eam_file(), lmp=eam_lmp(), jobs=2)
    return [frames[t.name][0].energy for t in trajs]


def test_same_seed_gives_identical_files_for_any_job_count(smoke_data, tmp_path):
    run_tool("make_cuni_data.py", str(tmp_path / "again"), "--plan", "smoke", "--seed", str(SEED), "--jobs", "1",
             "--lmp", eam_lmp(), "--eam", eam_file())
    for name in ("train.xyz", "valid.xyz", "test.xyz", "manifest.json"):
        assert filecmp.cmp(smoke_data / name, tmp_path / "again" / name, shallow=False), name
    run_tool("make_cuni_data.py", str(tmp_path / "other"), "--plan", "smoke", "--seed", str(SEED + 1),
             "--lmp", eam_lmp(), "--eam", eam_file())
    assert not filecmp.cmp(smoke_data / "train.xyz", tmp_path / "other" / "train.xyz", shallow=False)


def test_splits_are_disjoint_by_trajectory_and_cover_the_plan(smoke_data):
    configs = _configs(smoke_data)
    manifest = json.loads((smoke_data / "manifest.json").read_text())
    trajectories = {split: {c["trajectory"] for c in confs} for split, confs in configs.items()}
    assert not trajectories["train"] & trajectories["valid"]
    assert not trajectories["train"] & trajectories["test"]
    assert not trajectories["valid"] & trajectories["test"]
    plan = smoke_plan(SEED)
    assert set.union(*trajectories.values()) == {t.name for t in plan}
    assert sum(len(c) for c in configs.values()) == sum(t.frames for t in plan)
    for split, confs in configs.items():
        assert len(confs) == manifest["splits"][split]["configurations"] > 0
    sizes = [len(c["species"]) for confs in configs.values() for c in confs]
    assert min(sizes) >= 31 and max(sizes) <= 108
    kinds = {c["config_type"] for confs in configs.values() for c in confs}
    assert kinds == {"bulk_nvt", "bulk_cold", "strained_nvt", "strained_cold", "vacancy", "surface", "liquid"}


def test_forces_are_the_negative_energy_gradient_on_an_md_frame(smoke_data, tmp_path):
    conf = next(c for c in _configs(smoke_data)["train"] if c["config_type"] == "bulk_nvt")
    base = _structure(conf)
    moves = [(atom, axis) for atom in (0, 7, 19) for axis in range(3)]
    displaced = []
    for atom, axis in moves:
        for sign in (1, -1):
            pos = base.positions.copy()
            pos[atom, axis] += sign * H_DISPLACEMENT
            displaced.append(Structure(base.species, pos, base.cell))
    e = np.array(_energies(displaced, tmp_path)).reshape(-1, 2)
    fd = -(e[:, 0] - e[:, 1]) / (2 * H_DISPLACEMENT)
    label = np.array([conf["forces"][atom, axis] for atom, axis in moves])
    assert np.abs(label).max() > 0.1  # a thermal frame, not a lattice at rest
    np.testing.assert_allclose(label, fd, rtol=0, atol=FORCE_TOLERANCE)


def test_stress_is_the_strain_derivative_of_energy_as_mace_reads_it(smoke_data, tmp_path):
    import torch
    from mace.data import AtomicData
    from mace.data.utils import KeySpecification, load_from_xyz
    from mace.tools import AtomicNumberTable

    # A sheared, thermal cell: every one of the six components is nonzero.
    path = smoke_data / "train.xyz"
    index = next(i for i, c in enumerate(extxyz.read(path)) if c["config_type"] == "strained_nvt")
    conf = extxyz.read(path)[index]
    keys = KeySpecification.from_defaults().update(
        info_keys={"energy": extxyz.ENERGY_KEY, "stress": extxyz.STRESS_KEY}, arrays_keys={"forces": extxyz.FORCES_KEY})
    torch.set_default_dtype(torch.float64)
    _, mace_configs = load_from_xyz(str(path), keys)
    data = AtomicData.from_config(mace_configs[index], z_table=AtomicNumberTable([28, 29]), cutoff=5.0)
    mace_stress = data.stress[0].numpy()
    assert float(data.energy) == conf["energy"]
    np.testing.assert_array_equal(data.forces.numpy(), conf["forces"])

    base = _structure(conf)
    pairs = [(i, j) for i in range(3) for j in range(i, 3)]
    deformed = []
    for i, j in pairs:
        for sign in (1, -1):
            eps = np.zeros((3, 3))
            eps[i, j] += sign * H_STRAIN / 2
            eps[j, i] += sign * H_STRAIN / 2
            deformed.append(strained(base, eps))
    e = np.array(_energies(deformed, tmp_path)).reshape(-1, 2)
    # A symmetric strain with eps_ij = eps_ji = h/2 changes E by V sigma_ij h (i != j), and by
    # V sigma_ii h on the diagonal: either way sigma = dE / (V h).
    fd = np.zeros((3, 3))
    for (i, j), (plus, minus) in zip(pairs, e):
        fd[i, j] = fd[j, i] = (plus - minus) / (2 * H_STRAIN * base.volume)
    assert np.abs(fd[np.triu_indices(3, 1)]).min() > 1e-4  # shear components present
    np.testing.assert_allclose(mace_stress, fd, rtol=0, atol=STRESS_TOLERANCE)
