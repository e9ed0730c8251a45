"""Models with cuEquivariance operations (what `--enable_cueq` training saves) export through
mace-torch's convert_cueq_e3nn and equal the cuEquivariance model itself.

cuequivariance is not in the test venv (with it importable, mace-torch builds every new model on
cuEquivariance's basis, which the other tests do not expect): tools/install_deps.sh installs it
into a folder of its own, FLASHMACE_CUEQ_DIR, and cueq_export_case.py runs there in a subprocess:
it converts an MP-0-small-shaped random model to cuEquivariance, exports it, and evaluates the
cuEquivariance model with mace-torch. Here flashmace-eval (reference and fast paths, float64) must
match those outputs to the reference path's acceptance tolerances (test_architecture_presets.py),
and exporting the same checkpoint without cuequivariance must fail with an error that names the fix.
A missing FLASHMACE_CUEQ_DIR fails (it is a dependency of this test, not an option)."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_architecture_presets as presets  # noqa: E402

import export_mace  # noqa: E402

CUEQ_DIR = os.environ.get("FLASHMACE_CUEQ_DIR", "")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    assert CUEQ_DIR and os.path.isdir(os.path.join(CUEQ_DIR, "cuequivariance_torch")), \
        f"no cuequivariance-torch in FLASHMACE_CUEQ_DIR={CUEQ_DIR!r}: run tools/install_deps.sh"
    out = tmp_path_factory.mktemp("cueq")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([CUEQ_DIR, here, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.join(here, "cueq_export_case.py"), str(out)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"cueq_export_case.py failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return out, json.loads((out / "cases.json").read_text())


def test_cuequivariance_model_exports_like_itself(converted):
    out, data = converted
    assert data["provenance"]["converted"].startswith("cuEquivariance -> e3nn"), data["provenance"]
    assert data["atomic_numbers"] == presets.PRESET_ELEMENTS["mp0-small"]
    for kind, ref in data["cases"].items():
        assert max(abs(f) for row in ref["forces"] for f in row) > 1e-3, f"cueq {kind}: mace-torch forces negligible"
        for path in ("reference", "fast"):
            what = f"cuEquivariance mp0-small {kind}, --path {path}"
            got = presets.flashmace(out / "model.safetensors", out / f"{kind}.xyz", path, what)
            assert abs(got["energy"] - ref["energy"]) <= presets.ENERGY_RTOL * abs(ref["energy"]), \
                f"{what}: energy {got['energy']!r} vs mace-torch {ref['energy']!r}"
            presets.assert_close(got["forces"], ref["forces"], presets.FORCE_ATOL, what + ": forces")
            if kind == "bulk":
                presets.assert_close(got["stress"], ref["stress"], presets.STRESS_ATOL, what + ": stress")


def test_without_cuequivariance_the_error_names_the_fix(converted, tmp_path):
    out, _ = converted
    with pytest.raises(ValueError, match=r"cuEquivariance operations.*requirements-cueq\.txt"):
        export_mace.export_model(str(out / "cueq.model"), tmp_path / "model.safetensors")
