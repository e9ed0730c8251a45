"""Input-deck workflows around the pair style: restarts (the style keeps no restart information, so
the deck re-issues pair_style and pair_coeff after read_restart) and re-issuing pair_style to change
settings of an existing mace/flash pair."""
import numpy as np
from lammps_harness import CUNI_DATA, TINY, run_lammps, thermo_rows

SETUP = f"""units metal
atom_style atomic
atom_modify map array
newton on
"""
PAIR = f"pair_style mace/flash\npair_coeff * * {TINY} Cu Ni\n"
THERMO = "thermo_style custom step pe ke etotal press pxy\nthermo_modify format float %.17g\n"


def test_restart_continues_with_the_same_energy_and_pressure(tmp_path):
    # Two LAMMPS runs, as restarts are used: `clear` would forget the style (as it unloads plugins
    # in LAMMPS builds with PLUGIN; docs/pair_style.md, Restrictions).
    first = (SETUP + f"read_data {CUNI_DATA}\n" + PAIR + THERMO +
             "velocity all create 600.0 12345 loop geom\nfix nve all nve\ntimestep 0.001\nthermo 20\nrun 20\n"
             "write_restart state.restart\n")
    before = thermo_rows(run_lammps(tmp_path, first))[-1]
    second = SETUP + "read_restart state.restart\n" + PAIR + THERMO + "fix nve all nve\ntimestep 0.001\nrun 0\n"
    after = thermo_rows(run_lammps(tmp_path, second))[-1]
    assert before[0] == after[0] == 20
    # Restart files store coordinates and velocities as binary doubles: the state is exact.
    np.testing.assert_allclose(after, before, rtol=1e-14, atol=0)


def test_reissued_pair_style_reloads_the_model_with_new_settings(tmp_path):
    deck = (SETUP + f"read_data {CUNI_DATA}\n" + PAIR + THERMO + "run 0\n" +
            "pair_style mace/flash dtype float32\n" + "run 0\n" + "pair_style mace/flash\n" + "run 0\n")
    out = run_lammps(tmp_path, deck)
    assert "float32 on cpu" in out
    float64, float32, again = thermo_rows(out)[:, 1]
    assert float32 != float64 and abs(float32 - float64) < 1e-5 * abs(float64)
    assert again == float64
