"""flashmaceplugin.so (the `plugin load` entry point, lammpsplugin_init) registers a working
pair_style mace/flash: loaded into Debian's LAMMPS by a small host that does what the PLUGIN
package does, it gives flashmace-lmp's numbers bit for bit, serially and on 2 ranks; the same
sources compiled for other LAMMPS integer sizes (LAMMPS_BIGBIG) refuse to load into it."""
import os

import numpy as np
import pytest
from lammps_harness import CUNI_DATA, TINY, run_lammps, run_lammps_error, thermo_rows

PLUGIN = os.environ.get("FLASHMACE_PLUGIN", "")
HOST = os.environ.get("FLASHMACE_PLUGIN_HOST", "")
PLUGIN_BIGBIG = os.environ.get("FLASHMACE_PLUGIN_BIGBIG", "")

DECK = f"""units metal
atom_style atomic
atom_modify map array
newton on
read_data {CUNI_DATA}
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
timestep 0.001
velocity all create 600.0 4928459 loop geom
fix nve all nve
thermo_style custom step pe etotal press pxx pxy
thermo_modify format float %.17g
thermo 5
run 10
"""


@pytest.mark.skipif(not (PLUGIN and HOST), reason="flashmaceplugin.so or the test host was not built")
@pytest.mark.parametrize("nprocs", [1, 2])
def test_plugin_gives_the_same_numbers_as_flashmace_lmp(tmp_path, nprocs):
    (tmp_path / "lmp").mkdir()
    (tmp_path / "plugin").mkdir()
    direct = thermo_rows(run_lammps(tmp_path / "lmp", DECK, nprocs))
    out = run_lammps(tmp_path / "plugin", DECK, nprocs, exe=[HOST, PLUGIN])
    assert "Loading plugin: MACE interatomic potentials" in out
    np.testing.assert_array_equal(thermo_rows(out), direct)


@pytest.mark.skipif(not (PLUGIN_BIGBIG and HOST), reason="the LAMMPS_BIGBIG plugin or the test host was not built")
@pytest.mark.parametrize("nprocs", [1, 2])
def test_a_plugin_of_other_integer_sizes_refuses_to_load(tmp_path, nprocs):
    out = run_lammps_error(tmp_path, DECK, nprocs, exe=[HOST, PLUGIN_BIGBIG])
    assert ("ERROR: flashmaceplugin.so was compiled for LAMMPS integer sizes tagint 8, bigint 8, imageint 8 bytes "
            "(LAMMPS_BIGBIG), but this LAMMPS has tagint 4, bigint 8, imageint 4 bytes (LAMMPS_SMALLBIG): rebuild "
            "the plugin against this LAMMPS's headers") in out, out[-3000:]
    assert "Loading plugin" not in out and "Step" not in out
