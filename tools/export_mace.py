#!/usr/bin/env python3
"""Convert a MACE model into a flashmace model file (docs/model-format.md).

Two layers:
  * the core (no mace-torch needed): metadata_from_config() + write_model() take MACE's
    extract_config_mace_model() dictionary and a state_dict of numpy arrays;
  * the front end: export_model() takes a live mace-torch model object or a saved `.model` file
    (models with cuEquivariance operations are converted back to e3nn with mace-torch's own tool).

Usage:
  export_mace.py MODEL.model OUT.safetensors [--dtype float32|float64]
  export_mace.py --from-reference REF.safetensors OUT.safetensors [--dtype ...]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

FORMAT_NAME = "flashmace"
FORMAT_VERSION = 1
METADATA_KEY = "flashmace"

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """Returns ({name: array}, {metadata key: string})."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        tensors[name] = arr.reshape(info["shape"]).copy()
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.asarray(tensors[name], order="C")  # keeps 0-d scalars 0-d, unlike ascontiguousarray
        blob = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def _name(value):
    """Class objects, functions and e3nn Irreps in MACE's config dictionary -> plain strings."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "__name__"):
        return value.__name__
    return str(value)


def _per_layer(value, layers, what):
    values = list(np.atleast_1d(np.asarray(value, dtype=float)))
    if len(values) == 1:
        values = values * layers
    if len(values) != layers:
        raise ValueError(f"{what} has {len(values)} entries for {layers} interactions")
    return values


def _per_head(value, heads, what):
    """A number for one head, a list of one number per head otherwise."""
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64)).reshape(-1)
    if arr.size == 1 and heads > 1:
        arr = np.repeat(arr, heads)
    if arr.size != heads:
        raise ValueError(f"{what} has {arr.size} values for {heads} heads")
    return float(arr[0]) if heads == 1 else [float(v) for v in arr]


def metadata_from_config(config, avg_num_neighbors=None, dtype="float64", provenance=None):
    """MACE's extract_config_mace_model() dictionary -> the flashmace metadata document."""
    if "error" in config:
        raise ValueError(f"MACE could not describe the model: {config['error']}")
    layers = int(config["num_interactions"])
    if avg_num_neighbors is None:
        avg_num_neighbors = config["avg_num_neighbors"]
    heads = [str(h) for h in (config.get("heads") or ["Default"])]
    unsupported = [k for k in ("use_so3", "use_last_readout_only") if config.get(k)]
    system_embeddings = _system_embeddings(config.get("embedding_specs"))
    if config.get("cueq_config") is not None:
        unsupported.append("a cuEquivariance config (convert the model to e3nn first)")
    if unsupported:
        raise ValueError("the model uses MACE options flashmace does not implement: " + ", ".join(unsupported))
    correlation = [int(c) for c in np.atleast_1d(config["correlation"])]
    if len(correlation) == 1:
        correlation = correlation * layers
    edge_irreps = config.get("edge_irreps")
    edge_irreps = None if edge_irreps is None or str(edge_irreps) in ("", "None") else str(edge_irreps)
    distance_transform = _name(config.get("distance_transform"))
    if distance_transform in ("None", ""):
        distance_transform = None
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "model_type": "mace",
        "model_class": "ScaleShiftMACE",
        "dtype": dtype,
        "r_max": float(config["r_max"]),
        "num_bessel": int(config["num_bessel"]),
        "num_polynomial_cutoff": int(config["num_polynomial_cutoff"]),
        "radial_type": _name(config.get("radial_type", "bessel")),
        "distance_transform": distance_transform,
        "pair_repulsion": bool(config.get("pair_repulsion", False)),
        "apply_cutoff": bool(config.get("apply_cutoff", True)),
        "max_ell": int(config["max_ell"]),
        "hidden_irreps": str(config["hidden_irreps"]),
        "MLP_irreps": str(config["MLP_irreps"]),
        "edge_irreps": edge_irreps,
        "use_edge_irreps_first": bool(config.get("use_edge_irreps_first", False)),
        "use_agnostic_product": bool(config.get("use_agnostic_product", False)),
        "gate": _name(config.get("gate", "silu")),
        "num_interactions": layers,
        "correlation": correlation,
        "interaction_cls_first": _name(config["interaction_cls_first"]),
        "interaction_cls": _name(config["interaction_cls"]),
        "readout_cls": _name(config.get("readout_cls", "NonLinearReadoutBlock")),
        "radial_MLP": [int(w) for w in config["radial_MLP"]],
        "atomic_numbers": [int(z) for z in config["atomic_numbers"]],
        # [heads][elements], head-major (mace-torch's [heads, Z] buffer, or [Z] for one head)
        "atomic_energies": [float(e) for e in np.asarray(config["atomic_energies"], dtype=np.float64).reshape(-1)],
        "avg_num_neighbors": _per_layer(avg_num_neighbors, layers, "avg_num_neighbors"),
        "scale": _per_head(config["atomic_inter_scale"], len(heads), "scale"),
        "shift": _per_head(config["atomic_inter_shift"], len(heads), "shift"),
        "heads": heads,
        "system_embeddings": system_embeddings,
        "embedding_readout": bool(config.get("use_embedding_readout", False)) and bool(system_embeddings),
        "provenance": provenance or {},
    }


# mace-torch's per-structure data fields an embedding can read (AtomicData); their defaults live in
# src/core/system_inputs.h.
SYSTEM_INPUTS = ("total_charge", "total_spin", "elec_temp")


def _system_embeddings(specs):
    """mace-torch's embedding_specs (a dict: order matters, the embeddings are concatenated in it) ->
    a list of flashmace system embeddings. Only per-structure inputs (total charge, spin, electronic
    temperature): a per-atom one needs a value per atom that neither LAMMPS nor an xyz file gives."""
    out = []
    for name, spec in (specs or {}).items():
        if spec.get("per") != "graph":
            raise ValueError(f"embedding '{name}' is per {spec.get('per')}: flashmace takes per-structure inputs only "
                             f"({', '.join(SYSTEM_INPUTS)}), as pair_style keywords")
        if name not in SYSTEM_INPUTS:
            raise ValueError(f"embedding '{name}' reads a structure field flashmace does not know (it knows "
                             f"{', '.join(SYSTEM_INPUTS)})")
        kind = spec.get("type")
        item = {"name": name, "type": kind, "emb_dim": int(spec["emb_dim"])}
        if kind == "categorical":
            item.update(num_classes=int(spec["num_classes"]), offset=int(spec.get("offset", 0)))
        elif kind == "continuous":
            if int(spec.get("in_dim", 1)) != 1:
                raise ValueError(f"embedding '{name}': a per-structure input of {spec['in_dim']} values")
            item.update(use_bias=bool(spec.get("use_bias", True)))
        else:
            raise ValueError(f"embedding '{name}' has type '{kind}' (categorical or continuous)")
        out.append(item)
    return out


def write_model(path, config, state_dict, avg_num_neighbors=None, dtype=None, provenance=None):
    """Core exporter: config dict + {key: numpy array} -> flashmace model file."""
    floats = [a.dtype for a in state_dict.values() if np.issubdtype(a.dtype, np.floating)]
    source_dtype = "float32" if floats and all(d == np.float32 for d in floats) else "float64"
    dtype = dtype or source_dtype
    target = np.float64 if dtype == "float64" else np.float32
    tensors = {}
    for key, arr in state_dict.items():
        arr = np.asarray(arr)
        tensors[key] = arr.astype(target) if np.issubdtype(arr.dtype, np.floating) else arr
    meta = metadata_from_config(config, avg_num_neighbors, dtype, provenance)
    write_safetensors(path, tensors, {METADATA_KEY: json.dumps(meta)})
    return meta


def export_reference(reference_path, out_path, dtype=None):
    """A file laid out like the shared reference cases: model.<key> tensors, config in metadata."""
    tensors, metadata = read_safetensors(reference_path)
    info = json.loads(metadata["json"])
    config = info["extract_config_mace_model"]
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    provenance = {"exporter": "flashmace tools/export_mace.py", "source": os.path.basename(reference_path),
                  "source_kind": "reference file"}
    return write_model(out_path, config, state, dtype=dtype, provenance=provenance)


def uses_cuequivariance(model):
    """Whether the model runs cuEquivariance's operations (trained with enable_cueq, or converted by
    mace-torch's convert_e3nn_cueq): their weights are laid out for cuEquivariance, not e3nn."""
    return any(type(m).__module__.startswith("cuequivariance_torch") for m in model.modules())


def to_e3nn(model):
    """A cuEquivariance model converted back to e3nn modules by mace-torch's own convert_cueq_e3nn
    (on the CPU); torch's default dtype, which the converter sets, is restored."""
    import tempfile

    import torch
    from mace.cli.convert_cueq_e3nn import run as convert_cueq_e3nn

    default_dtype = torch.get_default_dtype()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cueq.model")
        torch.save(model, path)
        try:
            return convert_cueq_e3nn(path, device="cpu", return_model=True)
        finally:
            torch.set_default_dtype(default_dtype)


def export_model(model, out_path, dtype=None, source="live object"):
    """Front end: a mace-torch ScaleShiftMACE object, or the path of a saved `.model` file. Models with
    cuEquivariance operations are converted back to e3nn first (to_e3nn)."""
    import torch
    from mace.tools.scripts_utils import extract_config_mace_model

    if isinstance(model, (str, os.PathLike)):
        source = os.path.basename(str(model))
        try:
            model = torch.load(str(model), map_location="cpu", weights_only=False)
        except ModuleNotFoundError as err:
            if "cuequivariance" not in str(err):
                raise
            raise ValueError(f"{source} was saved with cuEquivariance operations (trained with enable_cueq) and "
                             f"loads only where cuequivariance-torch is installed ({err}); install the versions "
                             "of tools/requirements-cueq.txt (cuequivariance, cuequivariance-torch) where the "
                             "exporter runs, then export again: it converts the model back to e3nn") from err
    converted = uses_cuequivariance(model)
    if converted:
        model = to_e3nn(model)
    config = extract_config_mace_model(model)
    # extract_config_mace_model reads the correlation of the first product only; models may use one
    # per layer (correlation=[2, 3]), so take each layer's from its symmetric contraction.
    config["correlation"] = [len(p.symmetric_contractions.contractions[0].weights) + 1 for p in model.products]
    avg = [float(block.avg_num_neighbors) for block in model.interactions]
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    # mace-torch's trainer stores E0s per head, shape [heads, Z]; a one-head file holds [Z]
    # (a multi-head file keeps [heads, Z]: the loader's select_head takes one row).
    e0 = state.get("atomic_energies_fn.atomic_energies")
    if e0 is not None and e0.ndim == 2 and e0.shape[0] == 1:
        state["atomic_energies_fn.atomic_energies"] = e0.reshape(-1)
    try:
        import mace
        mace_version = getattr(mace, "__version__", "unknown")
    except ImportError:
        mace_version = "unknown"
    provenance = {"exporter": "flashmace tools/export_mace.py", "source": source, "source_kind": "mace-torch model",
                  "mace_version": mace_version, "torch_version": torch.__version__}
    if converted:
        provenance["converted"] = "cuEquivariance -> e3nn (mace.cli.convert_cueq_e3nn)"
    return write_model(out_path, config, state, avg_num_neighbors=avg, dtype=dtype, provenance=provenance)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="mace-torch .model file")
    parser.add_argument("output", help="flashmace model file to write (.safetensors)")
    parser.add_argument("--from-reference", metavar="FILE", help="read a reference-layout safetensors file instead")
    parser.add_argument("--dtype", choices=["float32", "float64"], help="convert float weights (default: keep)")
    args = parser.parse_args(argv)
    try:
        if args.from_reference:
            meta = export_reference(args.from_reference, args.output, args.dtype)
        elif args.model:
            meta = export_model(args.model, args.output, args.dtype)
        else:
            parser.error("give a MODEL file or --from-reference FILE")
    except (ValueError, KeyError, OSError) as err:
        print(f"export_mace.py: ERROR: {err}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {meta['hidden_irreps']}, {meta['num_interactions']} interactions, "
          f"elements {meta['atomic_numbers']}, {meta['dtype']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
