"""pair_style mace/flash/kk (flashmacekkplugin.so in a LAMMPS with KOKKOS, `-k on -sf kk`) gives the
plain style's numbers: the same plugin's mace/flash in the same LAMMPS without -k on.

* The shared reference structures (32-atom periodic triclinic cells of three models), one step:
  energy, per-atom energies, forces, virial and per-atom virials, on 1 and 2 ranks.
* The MD example (examples/lammps/in.md, 108 atoms, NVT then NVE): 100 steps of thermo output
  (energy, its per-atom sum, pressure and its per-atom sum) and the final positions and forces.
* The minimization example (examples/lammps/in.min, fix box/relax): 20 iterations (on a GPU against
  the plain style under the same Kokkos minimizer, see the test).
* Its errors are the plain style's (the common base's messages); `exchange off` changes its numbers.

CI runs these on Kokkos's host backend; with FLASHMACE_KOKKOS_GPU=1 (a CUDA Kokkos LAMMPS and the
plugin built against it, on a GPU machine) the same tests run the kk style with `-k on g 1` and both
styles' models on the GPU.

Tolerances (float64). One step: both styles run the same evaluator on the same edges, summed in
another order only if LAMMPS's Kokkos neighbour list orders neighbours differently (~1e-15
relative measured), so 1e-12 relative on the energy, 1e-10 eV/A on forces and 1e-10 eV on virials
keep orders of magnitude of margin while a wrong sign, a missing ghost update or a lost edge is
>1e-4. Trajectories: 100 MD steps amplify round-off by ~1e3 (the rank-count test sees ~1e-12);
1e-8 of each thermo column's scale and 1e-8 A on positions bound it from above."""
import os
import re
import shutil

import numpy as np
import pytest
from lammps_harness import EXAMPLES, run_lammps, run_lammps_error, thermo_rows
from test_reference_path import lammps_results

LMP = os.environ.get("FLASHMACE_KOKKOS_LMP", "")
PLUGIN = os.environ.get("FLASHMACE_KOKKOS_PLUGIN", "")
# FLASHMACE_KOKKOS_GPU=1 (a CUDA Kokkos LAMMPS on a GPU machine): the kk style on the GPU
# (`-k on g 1`), both styles' models on it (`device cuda`).
GPU = os.environ.get("FLASHMACE_KOKKOS_GPU") == "1"
KOKKOS = ["-k", "on", *(["g", "1"] if GPU else []), "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "full"]
DEVICE = "device cuda" if GPU else ""
PREAMBLE = f"plugin load {PLUGIN}\n"
CASES = ["small_l1", "scalar_l0", "large_l2"]
ENERGY_RTOL = 1e-12
TOL = 1e-10
TRAJECTORY_TOL = 1e-8

pytestmark = pytest.mark.skipif(not (LMP and PLUGIN), reason="no Kokkos LAMMPS or flashmacekkplugin.so")


def both_styles(tmp_path, run):
    """run(workdir, args) for the plain style and for the kk style; checks the kk style really ran."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "kk").mkdir()
    plain = run(tmp_path / "plain", ())
    kk = run(tmp_path / "kk", KOKKOS)
    # LAMMPS names the style of each neighbour list it builds.
    assert "(1) pair mace/flash/kk, perpetual" in kk["output"], kk["output"][-3000:]
    assert "(1) pair mace/flash, perpetual" in plain["output"], plain["output"][-3000:]
    return plain, kk


@pytest.mark.parametrize("nprocs", [1, 2], ids=["np1", "np2"])
@pytest.mark.parametrize("case", CASES)
def test_kk_equals_plain_on_reference_structures(tmp_path, case, nprocs):
    plain, kk = both_styles(tmp_path, lambda d, args: lammps_results(d, case, nprocs, style=DEVICE, exe=[LMP],
                                                                      args=args, preamble=PREAMBLE))
    assert abs(kk["energy"] - plain["energy"]) <= ENERGY_RTOL * abs(plain["energy"]), (kk["energy"], plain["energy"])
    for key in ("forces", "virial", "node_energy", "atom_virial", "atom_virial_sum"):
        np.testing.assert_allclose(kk[key], plain[key], rtol=0, atol=TOL, err_msg=key)
        assert np.max(np.abs(plain[key])) > 1e-3, f"{key}: nothing to compare"
    diffs = {k: float(np.max(np.abs(np.asarray(kk[k]) - np.asarray(plain[k]))))
             for k in ("energy", "forces", "virial", "node_energy", "atom_virial")}
    print(f"{case} on {nprocs} ranks: max |kk - plain| = {diffs}")


def without_exchange(tmp_path, nprocs):
    return both_styles(tmp_path, lambda d, args: lammps_results(
        d, "small_l1", nprocs, style=DEVICE if not args else f"{DEVICE} exchange off", exe=[LMP], args=args,
        preamble=PREAMBLE))


def test_kk_without_exchange_equal_np1(tmp_path):
    # One rank: every ghost is folded into the owned atom it is an image of, so the graph has no
    # ghost rows and nothing to exchange; `exchange off` changes nothing.
    plain, kk = without_exchange(tmp_path, 1)
    assert np.max(np.abs(kk["forces"] - plain["forces"])) <= 1e-10


def test_kk_without_exchange_differs_np2(tmp_path):
    # Negative control: on 2 ranks the kk style's ghost exchange (its own pack/unpack kernels)
    # carries the numbers above; with `exchange off` its ghosts keep zero features and the result moves.
    plain, kk = without_exchange(tmp_path, 2)
    assert np.max(np.abs(kk["forces"] - plain["forces"])) > 1e-4


def example_run(workdir, deck, nprocs, args, more, plain_pair=False):
    """An example deck; plain_pair: the plain style although `args` turn the kk suffix on (its
    pair_style and pair_coeff between `suffix off` and `suffix on`)."""
    shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", workdir)
    model = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
    text = PREAMBLE + open(f"{EXAMPLES}/{deck}").read()
    if GPU:
        text, n = re.subn(r"^(pair_style\s+mace/flash\b.*)$", r"\1 device cuda", text, flags=re.MULTILINE)
        assert n == 1, deck
    if plain_pair:
        text, n = re.subn(r"^(pair_style\s+mace/flash\b.*\n(?:.*\n)*?pair_coeff.*\n)", r"suffix off\n\1suffix on\n", text,
                          flags=re.MULTILINE)
        assert n == 1, deck
    text += "write_dump all custom final.dump id x y z fx fy fz modify sort id format float %.17g\n"
    out = run_lammps(workdir, text, nprocs, exe=[LMP], args=[*args, "-var", "model", model, *more])
    return {"output": out, "thermo": thermo_rows(out), "atoms": np.loadtxt(workdir / "final.dump", skiprows=9)}


def assert_same_run(plain, kk, what):
    scale = np.max(np.abs(plain["thermo"]), axis=0)
    worst = np.max(np.abs(kk["thermo"] - plain["thermo"]) / scale)
    np.testing.assert_array_equal(kk["atoms"][:, 0], plain["atoms"][:, 0])
    positions = np.max(np.abs(kk["atoms"][:, 1:4] - plain["atoms"][:, 1:4]))
    forces = np.max(np.abs(kk["atoms"][:, 4:7] - plain["atoms"][:, 4:7]))
    print(f"{what}: thermo {worst:.2e} of the column scale, positions {positions:.2e} A, forces {forces:.2e} eV/A")
    assert worst <= TRAJECTORY_TOL and positions <= TRAJECTORY_TOL and forces <= TRAJECTORY_TOL


def md_run(workdir, nprocs, args):
    return example_run(workdir, "in.md", nprocs, args, ["-var", "nvt_steps", "50", "-var", "nve_steps", "50",
                                                       "-var", "thermo_every", "10"])


@pytest.mark.parametrize("nprocs", [1, 2], ids=["np1", "np2"])
def test_kk_md_trajectory_equals_plain(tmp_path, nprocs):
    plain, kk = both_styles(tmp_path, lambda d, args: md_run(d, nprocs, args))
    assert kk["thermo"].shape == plain["thermo"].shape == (12, 12), (kk["output"][-3000:], plain["output"][-3000:])
    # Steps 0..50, 50..100 every 10. Step 50 twice: the end of the NVT run and the setup of the NVE
    # run (new neighbour list, same positions) give the same energy and pressure in both styles; a
    # stale graph or ghost map after the rebuild would not.
    for name, run in (("plain", plain), ("kk", kk)):
        scale = np.max(np.abs(run["thermo"]), axis=0)
        end, setup = run["thermo"][5], run["thermo"][6]
        assert end[0] == setup[0] == 50
        worst = np.max(np.abs(setup[2:] - end[2:]) / scale[2:])
        # (in.md prints 10 significant digits: 1e-8 of the scale is a few units in the last one)
        assert worst <= TRAJECTORY_TOL, f"{name}: step 50 differs by {worst:.2e} of the column scale after the rebuild"
    # Columns: step temp pe c_pe_sum ke etotal press v_press_sum pxx pyy pzz pxy (in.md).
    assert_same_run(plain, kk, f"100 MD steps on {nprocs} ranks")
    # Per-atom energies and virials add up to the totals along the trajectory, in the kk style too.
    pe, pe_sum, press, press_sum = (kk["thermo"][:, k] for k in (2, 3, 6, 7))
    np.testing.assert_allclose(pe_sum, pe, rtol=ENERGY_RTOL)
    np.testing.assert_allclose(press_sum, press, rtol=1e-9, atol=1e-6)


def test_kk_box_relax_equals_plain(tmp_path):
    # examples/lammps/in.min: fix box/relax (the virial drives the cell) with min_style cg (cg/kk).
    # On a GPU, this LAMMPS's cg/kk with fix box/relax leaves the plain minimizer's path after a few
    # iterations and stops ("linesearch alpha is zero") whatever the pair style: the plain style
    # under it gives the kk style's numbers (H200, docs/kokkos.md). There the plain style runs under
    # the same Kokkos minimizer, so that the pair styles are the only difference.
    def run(d, args):
        if GPU and not args:
            return example_run(d, "in.min", 1, KOKKOS, ["-var", "iterations", "20"], plain_pair=True)
        return example_run(d, "in.min", 1, args, ["-var", "iterations", "20"])

    plain, kk = both_styles(tmp_path, run)
    assert kk["thermo"].shape == plain["thermo"].shape and len(kk["thermo"]) >= 3
    assert_same_run(plain, kk, "20 box/relax iterations")


ERROR_DECK = PREAMBLE + """units metal
atom_style atomic
atom_modify map array
newton {newton}
region box block 0 8 0 8 0 8
create_box 2 box
create_atoms 1 single 1 1 1
create_atoms 2 single {x2} 1 1
mass * 60
pair_style mace/flash {keywords}
pair_coeff * * {model} Cu Ni
run 0
"""


@pytest.mark.parametrize("newton, x2, keywords, message", [
    ("on", 3, "device gpu", "ERROR: Illegal pair_style mace/flash device gpu: use cpu, cuda or cuda:N"),
    ("off", 3, "", "ERROR: Pair style mace/flash requires newton pair on"),
    ("on", 1.05, "", "ERROR on proc 0: Pair style mace/flash: atoms 1 and 2 are 0.050000 A apart, closer than 0.1 A"),
], ids=["keyword", "newton_off", "overlap"])
def test_kk_errors_are_the_plain_styles(tmp_path, newton, x2, keywords, message):
    model = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
    deck = ERROR_DECK.format(newton=newton, x2=x2, keywords=f"{keywords} {DEVICE}".strip(), model=model)
    for style, args in (("plain", []), ("kk", KOKKOS)):
        (tmp_path / style).mkdir()
        out = run_lammps_error(tmp_path / style, deck, exe=[LMP, *args])
        assert message in out, f"{style}: {out[-3000:]}"


def test_kk_errors_under_hybrid_name_the_way_out(tmp_path):
    model = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
    deck = ERROR_DECK.format(newton="on", x2=3, keywords="", model=model).replace(
        f"pair_style mace/flash \npair_coeff * * {model} Cu Ni",
        f"pair_style hybrid/overlay mace/flash {DEVICE} zbl 2.0 3.0\npair_coeff * * mace/flash {model} Cu Ni\n"
        "pair_coeff * * zbl 29 29")
    assert "hybrid/overlay" in deck
    out = run_lammps_error(tmp_path, deck, exe=[LMP, *KOKKOS])
    # This LAMMPS has no hybrid/overlay/kk and stops itself; with one, the kk style's init_style stops.
    assert ("ERROR: Must use pair_style hybrid/overlay/kk with Kokkos" in out or
            "ERROR: Pair style mace/flash/kk cannot be a sub-style of pair_style hybrid yet: use mace/flash (without "
            "/kk, with device cuda on a GPU) under pair_style hybrid/overlay" in out), out[-3000:]
