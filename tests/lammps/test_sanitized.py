"""The example MD deck (examples/lammps/in.md, shortened) through flashmace-lmp_asan: the pair style,
its halo exchanger and the torch-free libraries under it (model file, neighbour lists, CPU kernels,
symmetric contraction) built with ASan + UBSan (FLASHMACE_SANITIZE=ON, tests/reliability/sanitize). A sanitizer
report ends the run with a non-zero status, which fails run_lammps; a run that completes must also
print the thermo of flashmace-lmp (the same arithmetic: instrumentation adds checks, not rounding),
so a sanitized binary that silently computed something else fails too: measured identical to the
last printed digit, serially and on 2 ranks."""
import os
import shutil

import numpy as np
import pytest
from lammps_harness import EXAMPLES, LMP, run_lammps, thermo_rows

LMP_ASAN = os.environ.get("FLASHMACE_LMP_ASAN", "")
MODEL = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
# 20 NVT + 20 NVE steps of the 108-atom example, thermo every 5: per-atom energy and stress computes,
# a re-neighbouring (neighbor 1.0 bin, atoms moving at 600 K) and, on 2 ranks, the halo exchange.
ARGS = ["-var", "model", MODEL, "-var", "nvt_steps", "20", "-var", "nve_steps", "20", "-var", "thermo_every", "5"]


@pytest.mark.parametrize("nprocs", [pytest.param(1, id="np1"), pytest.param(2, id="np2")])
def test_sanitized_example_matches_flashmace_lmp(tmp_path, nprocs):
    assert LMP_ASAN, "FLASHMACE_LMP_ASAN is not set (configure with -DFLASHMACE_SANITIZE=ON)"
    shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path)
    deck = open(f"{EXAMPLES}/in.md").read()
    sanitized = run_lammps(tmp_path, deck, nprocs, args=ARGS, exe=[LMP_ASAN])
    plain = run_lammps(tmp_path, deck, nprocs, args=ARGS, exe=[LMP])
    rows, expected = thermo_rows(sanitized), thermo_rows(plain)
    assert rows.shape == expected.shape and rows.shape[0] == 10, rows.shape
    np.testing.assert_array_equal(rows, expected)
