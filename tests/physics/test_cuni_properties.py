"""Physical checks of the bundled Cu-Ni potential (potentials/CuNi-flashmace.safetensors, an EAM
surrogate) through pair_style mace/flash, each against the same quantity from pair_style
eam/alloy with the EAM file it was trained on, with issue 13's limits: fcc Cu and Ni lattice
constants within 0.5%, the Cu bulk modulus within 10%, the Cu vacancy formation energy within
0.15 eV, the 50% alloy's mixing energy within 10 meV/atom; 10 ps of NVE of the alloy at 800 K in
float64 drifts by less than 1e-4 eV/atom and stays fcc. Methods: cuni_properties.py.

FLASHMACE_CUNI_MODEL names another model file to check (default: the bundled one; a missing file
fails the test). FLASHMACE_CUNI_MODEL=eam/alloy puts EAM in the candidate's place, which checks
this file's machinery: every difference is then zero."""
import os

import cuni_properties as cp
import numpy as np
import pytest
from cuni_harness import SOURCE, eam_file, flashmace_lmp

MODEL = os.environ.get("FLASHMACE_CUNI_MODEL", os.path.join(SOURCE, "potentials", "CuNi-flashmace.safetensors"))
LATTICE_RELATIVE = 0.005
BULK_MODULUS_RELATIVE = 0.10
VACANCY_EV = 0.15
MIXING_EV_PER_ATOM = 0.010
NVE_TEMPERATURE, NVE_PICOSECONDS, NVE_TIMESTEP_FS = 800.0, 10.0, 1.0
MAX_DRIFT_EV_PER_ATOM = 1e-4  # over the whole run: EAM itself drifts ~4e-5 here (its splines)
MIN_FCC_FRACTION = 0.95  # of atoms classified fcc by CNA after a quench; a melted cell gives ~0


def _pair(which):
    if which == "eam" or MODEL == "eam/alloy":
        return cp.pair_lines("eam", eam_file=eam_file())
    assert os.path.isfile(MODEL), f"model file {MODEL} not found (FLASHMACE_CUNI_MODEL; tools/train_cuni.py makes it)"
    return cp.pair_lines("mace", model=MODEL)


def properties(which, workdir):
    pair, exe = _pair(which), flashmace_lmp()
    a_cu, e_cu = cp.equilibrium(pair, cp.CU, workdir, exe, a_guess=3.615)
    a_ni, e_ni = cp.equilibrium(pair, cp.NI, workdir, exe, a_guess=3.52)
    return {"a_cu": a_cu, "a_ni": a_ni, "e_cu": e_cu, "e_ni": e_ni,
            "bulk_cu": cp.bulk_modulus(pair, cp.CU, a_cu, workdir, exe),
            "vacancy_cu": cp.vacancy_formation(pair, a_cu, workdir, exe),
            "mixing": cp.mixing_energy(pair, 0.5 * (a_cu + a_ni), e_cu, e_ni, workdir, exe)}


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    return (properties("eam", str(tmp_path_factory.mktemp("eam"))),
            properties("candidate", str(tmp_path_factory.mktemp("candidate"))))


def _report(name, eam, candidate, unit):
    print(f"{name}: eam/alloy {eam:.6g} {unit}, {os.path.basename(MODEL)} {candidate:.6g} {unit}, "
          f"difference {candidate - eam:+.3g} {unit}")


@pytest.mark.parametrize("element", ["cu", "ni"])
def test_lattice_constant_matches_eam(both, element):
    eam, candidate = (p[f"a_{element}"] for p in both)
    _report(f"a0 {element}", eam, candidate, "A")
    assert 3.4 < eam < 3.7  # the relaxation found fcc Cu/Ni, not some other minimum
    assert abs(candidate / eam - 1) < LATTICE_RELATIVE


def test_cu_bulk_modulus_matches_eam(both):
    eam, candidate = (p["bulk_cu"] for p in both)
    _report("B Cu", eam, candidate, "GPa")
    assert 100 < eam < 200
    assert abs(candidate / eam - 1) < BULK_MODULUS_RELATIVE


def test_cu_vacancy_formation_energy_matches_eam(both):
    eam, candidate = (p["vacancy_cu"] for p in both)
    _report("E_vac Cu", eam, candidate, "eV")
    assert 0.5 < eam < 2.0
    assert abs(candidate - eam) < VACANCY_EV


def test_mixing_energy_at_half_matches_eam(both):
    eam, candidate = (p["mixing"] for p in both)
    _report("E_mix Cu50Ni50", eam, candidate, "eV/atom")
    assert abs(candidate - eam) < MIXING_EV_PER_ATOM


@pytest.mark.parametrize("which", ["eam", "candidate"])
def test_nve_conserves_energy_and_stays_fcc(both, which, tmp_path):
    p = both[0] if which == "eam" else both[1]
    time, energy, temperature, fcc = cp.nve(_pair(which), 0.5 * (p["a_cu"] + p["a_ni"]), NVE_TEMPERATURE,
                                            NVE_PICOSECONDS, NVE_TIMESTEP_FS, str(tmp_path), flashmace_lmp())
    drift = np.polyfit(time, energy, 1)[0] * (time[-1] - time[0])
    mean_t = temperature[len(temperature) // 2:].mean()
    print(f"NVE {which}: {time[-1] - time[0]:.3g} ps at {mean_t:.0f} K, drift {drift:+.2e} eV/atom, "
          f"max |E - E0| {np.abs(energy - energy[0]).max():.2e} eV/atom, fcc after quench {fcc:.3f}")
    assert time[-1] - time[0] == pytest.approx(NVE_PICOSECONDS)
    assert abs(mean_t - NVE_TEMPERATURE) < 0.25 * NVE_TEMPERATURE
    assert abs(drift) < MAX_DRIFT_EV_PER_ATOM
    assert fcc >= MIN_FCC_FRACTION
