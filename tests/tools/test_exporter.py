"""tools/export_mace.py.

Core (no mace-torch): on every shared reference file, the exported tensors equal the reference's
`model.<key>` tensors bit for bit (dtype, shape, bytes) and the metadata equals what MACE's
extract_config_mace_model() reported for the model; --dtype float32 converts the float tensors
only; the command line works; bad input fails cleanly.

Front end (mace-torch objects built here with small random hyperparameters, float64): a live
ScaleShiftMACE and the path of a torch.save'd one both give a file whose tensors equal
model.state_dict() bit for bit and whose metadata (avg_num_neighbors and correlation per layer
included) describes the model."""
import copy
import functools
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
EXPORTER = os.path.join(TOOLS, "export_mace.py")


def reference(path):
    tensors, metadata = export_mace.read_safetensors(path)
    return tensors, json.loads(metadata["json"])["extract_config_mace_model"]


def exported(path):
    tensors, metadata = export_mace.read_safetensors(path)
    return tensors, json.loads(metadata[export_mace.METADATA_KEY])


def cli(*args):
    return subprocess.run([sys.executable, EXPORTER, *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"))


def test_reference_files_exist():
    assert len(CASES) >= 3, f"expected the shared mace_*.safetensors cases in {REF_DIR}"


# ---------------------------------------------------------------------------------------------
# Core, on the shared reference files


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_core_reproduces_reference_tensors_and_config(tmp_path, path):
    ref_tensors, cfg = reference(path)
    out = tmp_path / "m.safetensors"
    returned = export_mace.export_reference(path, out)
    tensors, meta = exported(out)
    assert returned == meta

    model_keys = {k[len("model."):] for k in ref_tensors if k.startswith("model.")}
    assert model_keys and set(tensors) == model_keys
    for key in model_keys:
        a, b = tensors[key], ref_tensors["model." + key]
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), key

    layers = cfg["num_interactions"]
    assert meta["format"] == "flashmace" and meta["format_version"] == 1 and meta["dtype"] == "float64"
    assert meta["model_class"] == "ScaleShiftMACE" and meta["num_interactions"] == layers
    for key in ("r_max", "num_bessel", "num_polynomial_cutoff", "max_ell", "hidden_irreps", "MLP_irreps",
                "atomic_numbers", "radial_MLP", "interaction_cls_first", "interaction_cls", "radial_type",
                "pair_repulsion", "distance_transform", "apply_cutoff"):
        assert meta[key] == cfg[key], key
    assert meta["atomic_energies"] == cfg["atomic_energies"]
    assert meta["correlation"] == [cfg["correlation"]] * layers
    assert meta["avg_num_neighbors"] == [cfg["avg_num_neighbors"]] * layers
    assert meta["scale"] == cfg["atomic_inter_scale"] and meta["shift"] == cfg["atomic_inter_shift"]
    assert meta["gate"] == "silu" and meta["readout_cls"] == "NonLinearReadoutBlock"
    assert meta["provenance"]["source_kind"] == "reference file"
    assert meta["provenance"]["source"] == os.path.basename(path)


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_float32_conversion_touches_only_float_tensors(tmp_path, path):
    ref_tensors, _ = reference(path)
    out = tmp_path / "m32.safetensors"
    export_mace.export_reference(path, out, dtype="float32")
    tensors, meta = exported(out)
    assert meta["dtype"] == "float32"
    kinds = set()
    for key, arr in tensors.items():
        src = ref_tensors["model." + key]
        assert arr.shape == src.shape, key
        if np.issubdtype(src.dtype, np.floating):
            assert arr.dtype == np.float32 and arr.tobytes() == src.astype(np.float32).tobytes(), key
        else:
            assert arr.dtype == src.dtype and arr.tobytes() == src.tobytes(), key
        kinds.add(src.dtype.kind)
    assert {"f", "i", "b"} <= kinds  # the references hold float, integer and bool tensors


def test_command_line(tmp_path):
    out = tmp_path / "cli.safetensors"
    ok = cli("--from-reference", CASES[0], out)
    assert ok.returncode == 0, ok.stderr
    assert out.exists() and "wrote" in ok.stdout and "float64" in ok.stdout
    direct = tmp_path / "direct.safetensors"
    export_mace.export_reference(CASES[0], direct)
    a, b = export_mace.read_safetensors(out)[0], export_mace.read_safetensors(direct)[0]
    assert set(a) == set(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)

    out32 = tmp_path / "cli32.safetensors"
    ok32 = cli("--from-reference", CASES[0], out32, "--dtype", "float32")
    assert ok32.returncode == 0 and "float32" in ok32.stdout, ok32.stderr
    assert exported(out32)[1]["dtype"] == "float32"


def test_command_line_errors_are_clean(tmp_path):
    missing = tmp_path / "missing.safetensors"
    bad = cli("--from-reference", missing, tmp_path / "x.safetensors")
    assert bad.returncode == 1 and "ERROR" in bad.stderr and "missing.safetensors" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "x.safetensors").exists()

    not_a_reference = tmp_path / "plain.safetensors"
    export_mace.write_safetensors(not_a_reference, {"x": np.zeros(2)}, {})
    bad = cli("--from-reference", not_a_reference, tmp_path / "y.safetensors")
    assert bad.returncode == 1 and "ERROR" in bad.stderr and "Traceback" not in bad.stderr

    usage = cli(tmp_path / "z.safetensors")
    assert usage.returncode == 2 and "--from-reference" in usage.stderr


def test_unsupported_configurations_are_refused():
    _, cfg = reference(CASES[0])
    with pytest.raises(ValueError, match="scale has 3 values for 2 heads"):
        export_mace.metadata_from_config(dict(cfg, heads=["a", "b"], atomic_inter_scale=[1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="scale has 2 values for 1 heads"):
        export_mace.metadata_from_config(dict(cfg, atomic_inter_scale=[1.0, 2.0]))
    # several heads: a scale and shift per head (one number stands for all), every head kept
    meta = export_mace.metadata_from_config(dict(cfg, heads=["a", "b"], atomic_inter_scale=[1.0, 2.0]))
    assert meta["heads"] == ["a", "b"] and meta["scale"] == [1.0, 2.0] and len(meta["shift"]) == 2
    with pytest.raises(ValueError, match="use_so3"):
        export_mace.metadata_from_config(dict(cfg, use_so3=True))
    with pytest.raises(ValueError, match="could not describe"):
        export_mace.metadata_from_config({"error": "Model is not a ScaleShiftMACE or MACELES model"})
    with pytest.raises(ValueError, match="avg_num_neighbors"):
        export_mace.metadata_from_config(cfg, avg_num_neighbors=[1.0] * (cfg["num_interactions"] + 1))


# ---------------------------------------------------------------------------------------------
# Front end, on live mace-torch objects

# Small random models: (seed, first block, later block, distance transform, ZBL, hidden irreps,
# correlation, number of elements)
LIVE = {
    "residual": (3, "RealAgnosticResidualInteractionBlock", "RealAgnosticResidualInteractionBlock", "None", False,
                 "4x0e+4x1o", 2, 2),
    "nonresidual_agnesi_zbl": (4, "RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock", "Agnesi",
                               True, "6x0e", 3, 3),
    "density_soft": (5, "RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock", "Soft",
                     False, "4x0e+4x1o+4x2e", 1, 1),
}


def mace_modules():
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
    torch = pytest.importorskip("torch")
    pytest.importorskip("mace")
    from e3nn import o3
    from mace import modules
    torch.set_default_dtype(torch.float64)
    return torch, o3, modules


def live_model(*args, **kwargs):
    """A fresh copy of a cached model (building one takes seconds): tests may modify theirs."""
    model, hp = _live_model(*args, **kwargs)
    return copy.deepcopy(model), hp


@functools.lru_cache(maxsize=None)
def _live_model(seed, first, rest, transform, zbl, hidden, correlation, num_elements, layers=None):
    torch, o3, modules = mace_modules()
    correlation = list(correlation) if isinstance(correlation, tuple) else correlation
    rng = np.random.default_rng(seed)
    layers = layers or int(rng.integers(2, 4))
    zs = sorted(int(z) for z in rng.choice(np.arange(1, 87), size=num_elements, replace=False))
    hp = dict(
        r_max=float(rng.uniform(3.0, 6.0)), num_bessel=int(rng.integers(4, 9)),
        num_polynomial_cutoff=int(rng.integers(3, 7)), max_ell=2,
        interaction_cls=modules.interaction_classes[rest], interaction_cls_first=modules.interaction_classes[first],
        num_interactions=layers, num_elements=num_elements, hidden_irreps=o3.Irreps(hidden),
        MLP_irreps=o3.Irreps(f"{int(rng.choice([4, 8]))}x0e"), atomic_energies=rng.uniform(-5, 0, num_elements),
        avg_num_neighbors=float(rng.uniform(2, 30)), atomic_numbers=zs, correlation=correlation,
        gate=torch.nn.functional.silu, radial_MLP=[int(rng.choice([8, 16])) for _ in range(rng.integers(1, 4))],
        atomic_inter_scale=float(rng.uniform(0.5, 2.0)), atomic_inter_shift=float(rng.uniform(-1, 1)),
        pair_repulsion=zbl, distance_transform=transform)
    torch.manual_seed(seed)
    model = modules.ScaleShiftMACE(**hp)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    return model, hp


def check_file_describes_model(path, model, hp, dtype="float64"):
    tensors, meta = exported(path)
    state = model.state_dict()
    assert set(tensors) == set(state)
    for key, value in state.items():
        v = value.detach().cpu().numpy()
        if dtype == "float32" and np.issubdtype(v.dtype, np.floating):
            v = v.astype(np.float32)
        assert tensors[key].dtype == v.dtype and tensors[key].shape == v.shape, key
        assert tensors[key].tobytes() == v.tobytes(), key

    layers = hp["num_interactions"]
    correlation = hp["correlation"] if isinstance(hp["correlation"], list) else [hp["correlation"]] * layers
    assert meta["dtype"] == dtype and meta["num_interactions"] == layers
    assert meta["avg_num_neighbors"] == [float(b.avg_num_neighbors) for b in model.interactions]
    assert meta["correlation"] == correlation
    assert meta["r_max"] == hp["r_max"] and meta["max_ell"] == hp["max_ell"]
    assert meta["num_bessel"] == hp["num_bessel"] and meta["num_polynomial_cutoff"] == hp["num_polynomial_cutoff"]
    assert meta["hidden_irreps"] == str(hp["hidden_irreps"]) and meta["MLP_irreps"] == str(hp["MLP_irreps"])
    assert meta["atomic_numbers"] == hp["atomic_numbers"]
    assert meta["atomic_energies"] == [float(e) for e in hp["atomic_energies"]]
    assert meta["radial_MLP"] == hp["radial_MLP"]
    assert meta["interaction_cls_first"] == hp["interaction_cls_first"].__name__
    assert meta["interaction_cls"] == hp["interaction_cls"].__name__
    assert meta["pair_repulsion"] == hp["pair_repulsion"]
    assert meta["distance_transform"] == (None if hp["distance_transform"] == "None" else hp["distance_transform"])
    assert meta["scale"] == hp["atomic_inter_scale"] and meta["shift"] == hp["atomic_inter_shift"]
    assert meta["gate"] == "silu" and meta["radial_type"] == "bessel" and meta["apply_cutoff"] is True
    assert meta["provenance"]["source_kind"] == "mace-torch model"
    return meta


@pytest.mark.parametrize("name", list(LIVE))
def test_front_end_exports_live_models_and_saved_files(tmp_path, name):
    torch, _, _ = mace_modules()
    model, hp = live_model(*LIVE[name])
    if name == "density_soft":  # per-layer normalisation is read from each block, not from the config
        for i, block in enumerate(model.interactions):
            block.avg_num_neighbors = 3.0 + 4.5 * i

    live = tmp_path / "live.safetensors"
    returned = export_mace.export_model(model, live)
    meta = check_file_describes_model(live, model, hp)
    assert returned == meta and meta["provenance"]["source"] == "live object"

    saved = tmp_path / "saved.model"
    torch.save(model, saved)
    from_file = tmp_path / "file.safetensors"
    returned = export_mace.export_model(str(saved), from_file)
    meta = check_file_describes_model(from_file, model, hp)
    assert returned == meta and meta["provenance"]["source"] == "saved.model"


def test_front_end_keeps_per_layer_correlation(tmp_path):
    # MACE accepts one correlation order per layer; extract_config_mace_model() reports only the first
    # layer's, so the exporter must read each product block.
    model, hp = live_model(6, "RealAgnosticResidualInteractionBlock", "RealAgnosticResidualInteractionBlock", "None",
                           False, "4x0e+4x1o", (3, 1), 2, layers=2)
    out = tmp_path / "m.safetensors"
    export_mace.export_model(model, out)
    check_file_describes_model(out, model, hp)


def test_front_end_float32(tmp_path):
    torch, _, _ = mace_modules()
    model, hp = live_model(*LIVE["residual"])
    out = tmp_path / "m32.safetensors"
    export_mace.export_model(model, out, dtype="float32")
    check_file_describes_model(out, model, hp, dtype="float32")

    # A float32 model keeps float32 by default; its hyperparameter buffers are float32 now.
    model32 = model.float()
    out_default = tmp_path / "m32_default.safetensors"
    export_mace.export_model(model32, out_default)
    hp32 = dict(hp, r_max=float(np.float32(hp["r_max"])), atomic_energies=hp["atomic_energies"].astype(np.float32),
                atomic_inter_scale=float(np.float32(hp["atomic_inter_scale"])),
                atomic_inter_shift=float(np.float32(hp["atomic_inter_shift"])))
    check_file_describes_model(out_default, model32, hp32, dtype="float32")


def test_front_end_command_line_and_errors(tmp_path, capsys):
    torch, o3, modules = mace_modules()
    model, hp = live_model(*LIVE["residual"])
    saved = tmp_path / "saved.model"
    torch.save(model, saved)
    # main() in process (test_command_line runs the script itself): a second interpreter would spend
    # seconds importing torch and mace.
    out = tmp_path / "cli.safetensors"
    assert export_mace.main([str(saved), str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    check_file_describes_model(out, model, hp)

    assert export_mace.main([str(tmp_path / "missing.model"), str(tmp_path / "x.safetensors")]) == 1
    err = capsys.readouterr().err
    assert "ERROR" in err and "missing.model" in err and not (tmp_path / "x.safetensors").exists()

    # A plain MACE (not ScaleShiftMACE) is refused without writing anything.
    plain_hp = {k: v for k, v in hp.items() if k not in ("atomic_inter_scale", "atomic_inter_shift")}
    plain = modules.MACE(**dict(plain_hp, hidden_irreps=o3.Irreps("4x0e"), correlation=1))
    with pytest.raises(ValueError, match="could not describe"):
        export_mace.export_model(plain, tmp_path / "plain.safetensors")
    assert not (tmp_path / "plain.safetensors").exists()
