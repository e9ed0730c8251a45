"""tools/export_mace.py: the core reproduces MACE's tensors and hyperparameters from the shared
reference files bit for bit, the front end does the same from live mace-torch objects and saved
`.model` files, and bad input fails cleanly."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import export_mace

REF_DIR = os.environ["FLASHMACE_REFERENCE_DIR"]
TOOLS = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "tools")
CASES = sorted(glob.glob(os.path.join(REF_DIR, "mace_*.safetensors")))


def reference(path):
    tensors, metadata = export_mace.read_safetensors(path)
    return tensors, json.loads(metadata["json"])["extract_config_mace_model"]


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_core_reproduces_reference_tensors_and_config(tmp_path, path):
    ref_tensors, cfg = reference(path)
    out = tmp_path / "m.safetensors"
    export_mace.export_reference(path, out)
    tensors, metadata = export_mace.read_safetensors(out)
    meta = json.loads(metadata[export_mace.METADATA_KEY])

    model_keys = {k[len("model."):] for k in ref_tensors if k.startswith("model.")}
    assert set(tensors) == model_keys
    for key in model_keys:
        a, b = tensors[key], ref_tensors["model." + key]
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), key

    layers = cfg["num_interactions"]
    assert meta["format"] == "flashmace" and meta["format_version"] == 1 and meta["dtype"] == "float64"
    for key in ("r_max", "num_bessel", "num_polynomial_cutoff", "max_ell", "hidden_irreps", "MLP_irreps",
                "atomic_numbers", "radial_MLP", "interaction_cls_first", "interaction_cls"):
        assert meta[key] == cfg[key], key
    assert meta["atomic_energies"] == cfg["atomic_energies"]
    assert meta["correlation"] == [cfg["correlation"]] * layers
    assert meta["avg_num_neighbors"] == [cfg["avg_num_neighbors"]] * layers
    assert meta["scale"] == cfg["atomic_inter_scale"] and meta["shift"] == cfg["atomic_inter_shift"]


def test_float32_conversion_touches_only_float_tensors(tmp_path):
    ref_tensors, _ = reference(CASES[0])
    out = tmp_path / "m32.safetensors"
    export_mace.export_reference(CASES[0], out, dtype="float32")
    tensors, metadata = export_mace.read_safetensors(out)
    assert json.loads(metadata[export_mace.METADATA_KEY])["dtype"] == "float32"
    for key, arr in tensors.items():
        src = ref_tensors["model." + key]
        if np.issubdtype(src.dtype, np.floating):
            assert arr.dtype == np.float32 and np.array_equal(arr, src.astype(np.float32)), key
        else:
            assert arr.dtype == src.dtype and arr.tobytes() == src.tobytes(), key


def test_command_line(tmp_path):
    out = tmp_path / "cli.safetensors"
    ok = subprocess.run([sys.executable, os.path.join(TOOLS, "export_mace.py"), "--from-reference", CASES[0], str(out)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and out.exists() and "wrote" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, os.path.join(TOOLS, "export_mace.py"), "--from-reference",
                          str(tmp_path / "missing.safetensors"), str(tmp_path / "x.safetensors")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "ERROR" in bad.stderr and "missing.safetensors" in bad.stderr


def test_unsupported_configurations_are_refused():
    _, cfg = reference(CASES[0])
    with pytest.raises(ValueError, match="multi-head"):
        export_mace.metadata_from_config(dict(cfg, heads=["a", "b"]))
    with pytest.raises(ValueError, match="use_so3"):
        export_mace.metadata_from_config(dict(cfg, use_so3=True))
    with pytest.raises(ValueError, match="could not describe"):
        export_mace.metadata_from_config({"error": "Model is not a ScaleShiftMACE or MACELES model"})


def live_model(seed=3):
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
    torch = pytest.importorskip("torch")
    from e3nn import o3
    from mace import modules

    torch.set_default_dtype(torch.float64)
    torch.manual_seed(seed)
    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    return modules.ScaleShiftMACE(
        r_max=4.0, num_bessel=6, num_polynomial_cutoff=5, max_ell=2, interaction_cls=block, interaction_cls_first=block,
        num_interactions=2, num_elements=2, hidden_irreps=o3.Irreps("4x0e+4x1o"), MLP_irreps=o3.Irreps("4x0e"),
        atomic_energies=np.array([-1.5, -2.5]), avg_num_neighbors=7.5, atomic_numbers=[6, 8], correlation=2,
        gate=torch.nn.functional.silu, radial_MLP=[8, 8], atomic_inter_scale=1.2, atomic_inter_shift=0.1)


def check_matches_state_dict(path, model):
    tensors, metadata = export_mace.read_safetensors(path)
    meta = json.loads(metadata[export_mace.METADATA_KEY])
    state = model.state_dict()
    assert set(tensors) == set(state)
    for key, value in state.items():
        v = value.detach().cpu().numpy()
        assert tensors[key].dtype == v.dtype and tensors[key].shape == v.shape, key
        assert tensors[key].tobytes() == v.tobytes(), key
    assert meta["avg_num_neighbors"] == [float(b.avg_num_neighbors) for b in model.interactions]
    assert meta["atomic_numbers"] == [6, 8] and meta["hidden_irreps"] == "4x0e+4x1o"
    assert meta["provenance"]["source_kind"] == "mace-torch model"


def test_front_end_exports_live_models_and_saved_files(tmp_path):
    import torch

    model = live_model()
    live = tmp_path / "live.safetensors"
    export_mace.export_model(model, live)
    check_matches_state_dict(live, model)

    saved = tmp_path / "model.model"
    torch.save(model, saved)
    from_file = tmp_path / "file.safetensors"
    export_mace.export_model(str(saved), from_file)
    check_matches_state_dict(from_file, model)
