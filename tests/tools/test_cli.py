"""flashmace-eval end to end: the JSON it prints equals official MACE's numbers on the shared
reference structures, and bad input gives a clear message and a non-zero exit code."""
import json
import os
import subprocess

import numpy as np
import pytest
from export_mace import read_safetensors

EVAL = os.environ["FLASHMACE_EVAL"]
REF_DIR = os.environ["FLASHMACE_REFERENCE_DIR"]
MODELS = os.environ["FLASHMACE_EXPORTED_MODEL_DIR"]
SYMBOLS = {1: "H", 6: "C", 8: "O", 14: "Si", 28: "Ni", 29: "Cu"}


def write_xyz(path, numbers, positions, cell=None, pbc=(False, False, False)):
    lines = [str(len(numbers))]
    header = "Properties=species:S:1:pos:R:3"
    if any(pbc):
        header = 'Lattice="%s" pbc="%s" ' % (" ".join(repr(float(x)) for x in np.ravel(cell)),
                                             " ".join("T" if p else "F" for p in pbc)) + header
    lines.append(header)
    for z, p in zip(numbers, positions):
        lines.append("%s %r %r %r" % (SYMBOLS[int(z)], float(p[0]), float(p[1]), float(p[2])))
    path.write_text("\n".join(lines) + "\n")


def run(*args):
    return subprocess.run([EVAL, *args], capture_output=True, text=True)


@pytest.mark.parametrize("path", [["--path", "reference"], ["--path", "fast"], ["--path", "fast", "--edge-chunk", "7"],
                                  ["--path", "fast", "--edge-chunk", "64", "--atom-chunk", "5"]],
                         ids=["reference", "fast", "fast-chunk7", "fast-chunk64"])
@pytest.mark.parametrize("case", ["small_l1", "scalar_l0", "large_l2"])
@pytest.mark.parametrize("structure", ["bulk", "cluster"])
def test_eval_json_matches_official_mace(tmp_path, case, structure, path):
    t, _ = read_safetensors(os.path.join(REF_DIR, f"mace_{case}.safetensors"))
    pbc = tuple(bool(x) for x in t[f"{structure}.input.pbc"])
    xyz = tmp_path / "s.xyz"
    write_xyz(xyz, t[f"{structure}.input.atomic_numbers"], t[f"{structure}.input.positions"],
              t[f"{structure}.input.cell"], pbc)
    proc = run("--model", os.path.join(MODELS, f"{case}.safetensors"), "--xyz", str(xyz), *path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    e_ref = t[f"{structure}.output.energy"][0]
    assert abs(out["energy"] - e_ref) <= 1e-12 * abs(e_ref)
    np.testing.assert_allclose(out["node_energy"], t[f"{structure}.output.node_energy"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(out["forces"], t[f"{structure}.output.forces"], rtol=0, atol=1e-10)
    if all(pbc):
        np.testing.assert_allclose(out["stress"], t[f"{structure}.output.stress"], rtol=0, atol=1e-10)


def test_bad_input_gives_clear_errors(tmp_path):
    model = os.path.join(MODELS, "small_l1.safetensors")  # Ni, Cu
    good = tmp_path / "good.xyz"
    write_xyz(good, [28, 29], [[0, 0, 0], [2.0, 0, 0]])

    cases = {
        "missing model": (["--model", str(tmp_path / "nope.safetensors"), "--xyz", str(good)], "Cannot open model file"),
        "not a model": (["--model", str(good), "--xyz", str(good)], "truncated"),
        "missing xyz": (["--model", model, "--xyz", str(tmp_path / "nope.xyz")], "Cannot open XYZ file"),
    }
    unknown = tmp_path / "unknown.xyz"
    write_xyz(unknown, [28, 8], [[0, 0, 0], [2.0, 0, 0]])
    cases["unknown element"] = (["--model", model, "--xyz", str(unknown)], "which the model does not know")
    overlap = tmp_path / "overlap.xyz"
    write_xyz(overlap, [28, 29, 29], [[0, 0, 0], [2.0, 0, 0], [2.0, 0, 0]])
    cases["overlap"] = (["--model", model, "--xyz", str(overlap)], "Atoms 1 and 2")
    nan = tmp_path / "nan.xyz"
    nan.write_text("2\nProperties=species:S:1:pos:R:3\nNi 0 0 0\nCu nan 0 0\n")
    cases["nan"] = (["--model", model, "--xyz", str(nan)], "Atom 1 has a non-finite coordinate")
    empty = tmp_path / "empty.xyz"
    empty.write_text("0\nProperties=species:S:1:pos:R:3\n")
    cases["empty"] = (["--model", model, "--xyz", str(empty)], "Empty structure")
    cases["unknown path"] = (["--model", model, "--xyz", str(good), "--path", "quick"], "--path quick: use fast or reference")
    cases["negative chunk"] = (["--model", model, "--xyz", str(good), "--edge-chunk", "-1"], "--edge-chunk -1: use 0 (automatic) or more")

    for name, (args, message) in cases.items():
        proc = run(*args)
        assert proc.returncode == 1, name
        assert message in proc.stderr, (name, proc.stderr)
        assert "ERROR" in proc.stderr and "terminate" not in proc.stderr, name

    usage = run("--model", model)
    assert usage.returncode == 2 and "--xyz are required" in usage.stderr
