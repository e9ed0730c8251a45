"""Regression: each deck in examples/lammps runs as shipped (the bundled Cu-Ni potential) and its
thermo output matches the stored log in examples/lammps/reference (made with
`flashmace-lmp -in <deck> -log reference/<name>.log`, 1 rank).

Tolerance: the logs print 10 significant digits (5e-10 relative). A machine with other SIMD
kernels in LibTorch sums in another order (~1e-16 relative per step); MD and CG amplify that, by
about 1e3-1e5 over these 400 steps / 50 iterations (the rank-count test, whose only difference is
summation order, sees ~1e-12 after 100 steps). 1e-6 of each column's scale sits far above both
and far below any change of the physics (a changed weight, cutoff or force moves the first rows
by >1e-4)."""
import os
import shutil

import numpy as np
import pytest
from lammps_harness import EXAMPLES, run_lammps, thermo_rows

RTOL = 1e-6


@pytest.mark.parametrize("deck, log", [("in.md", "md.log"), ("in.min", "min.log")])
def test_example_matches_stored_log(tmp_path, deck, log):
    shutil.copy(f"{EXAMPLES}/cuni_fcc108.data", tmp_path)
    model = os.path.abspath(f"{EXAMPLES}/../../potentials/CuNi-flashmace.safetensors")
    out = run_lammps(tmp_path, open(f"{EXAMPLES}/{deck}").read(), args=["-var", "model", model])
    rows = thermo_rows(out)
    stored = thermo_rows(open(f"{EXAMPLES}/reference/{log}").read())
    assert rows.shape == stored.shape and rows.size > 0
    scale = np.max(np.abs(stored), axis=0)
    worst = np.max(np.abs(rows - stored) / scale)
    print(f"{deck}: largest difference from the stored log {worst:.2e} of the column scale")
    assert worst <= RTOL, worst
