"""The cuEquivariance side of test_cueq_export.py, run where cuequivariance is importable (its own
folder on PYTHONPATH): an MP-0-small-shaped random model converted to cuEquivariance by mace-torch's
convert_e3nn_cueq, saved (OUT/cueq.model), exported by export_mace (OUT/model.safetensors), and
evaluated by mace-torch on test_architecture_presets.py's three structures (OUT/<kind>.xyz);
OUT/cases.json holds those outputs and the export's provenance.

Usage: cueq_export_case.py OUT"""
import json
import pathlib
import sys

import numpy as np
import torch
from mace.cli.convert_e3nn_cueq import run as convert_e3nn_cueq

import export_mace
import make_random_model
import test_architecture_presets as presets


def main(out):
    zs = presets.PRESET_ELEMENTS["mp0-small"]
    torch.save(make_random_model.build("mp0-small", seed=5, elements=zs), out / "e3nn.model")
    cueq = convert_e3nn_cueq(str(out / "e3nn.model"), device="cpu", return_model=True)
    torch.set_default_dtype(torch.float64)
    cueq.eval()
    if not export_mace.uses_cuequivariance(cueq):
        sys.exit("convert_e3nn_cueq gave a model without cuEquivariance operations")
    torch.save(cueq, out / "cueq.model")
    meta = export_mace.export_model(str(out / "cueq.model"), out / "model.safetensors")
    rng = np.random.default_rng(7)
    cases = {}
    for kind, make in presets.STRUCTURES.items():
        atoms = make(rng, zs)
        presets.write_xyz(out / f"{kind}.xyz", atoms)
        cases[kind] = {k: np.asarray(v).tolist() for k, v in presets.mace_outputs(cueq, atoms, zs).items()}
    (out / "cases.json").write_text(json.dumps({"provenance": meta["provenance"],
                                                "atomic_numbers": meta["atomic_numbers"], "cases": cases}))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
