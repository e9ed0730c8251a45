"""flashmace from Python: an ASE calculator on the engine, and the exporter of mace-torch models.

    import flashmace
    atoms.calc = flashmace.Calculator(model="CuNi.safetensors", device="cuda", dtype="float32")
    flashmace.export(mace_model_or_path, "model.safetensors", dtype="float64")

The calculator gives energy, free_energy, forces, stress (periodic cells), energies and stresses
(per atom), as mace-torch's MACECalculator names them. Neighbour lists are built in C++ with a skin
and kept while no atom moves more than half of it, so MD steps hand the engine positions only (on a
GPU: CUDA-graph replays). docs/python.md.
"""
import os
import subprocess
import sys

import numpy as np
from ase.calculators.calculator import Calculator as _AseCalculator
from ase.calculators.calculator import PropertyNotImplementedError, all_changes

from . import _core
from ._paths import EXPORT_SCRIPT

__all__ = ["Calculator", "export", "Error"]

Error = _core.Error

# LAMMPS's per-atom virial order (the engine's) -> ASE's Voigt order xx yy zz yz xz xy
_TO_ASE_VOIGT = [0, 1, 2, 5, 4, 3]


class Calculator(_AseCalculator):
    """ASE calculator on a flashmace model file (tools/export_mace.py or flashmace.export).

    model: the .safetensors model file; device: "cpu", "cuda" or "cuda:N"; dtype: "float64" or
    "float32" (default: the model's); head: a multi-head model's head (default: its head named
    "default", as mace-torch's calculator; a wrong name raises, listing the heads);
    skin: the neighbour-list skin in A (0: a new list at every call); further keyword arguments are
    the engine's options (pair_style keywords: path, memory, edge_chunk, atom_chunk, sc,
    radial_pairs, cuda_graph, tf32, ...), e.g. path="reference".
    Models with per-structure inputs (MACE-OMOL's total charge and spin) read them, as mace-torch's
    calculator does, from atoms.info["charge"], ["spin"] (and ["elec_temp"]) unless charge=, spin=
    (elec_temp=) fix them; absent ones take mace-torch's defaults (charge 0, spin 1).
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies", "stresses"]

    def __init__(self, model, device="cpu", dtype=None, head=None, skin=1.0, **options):
        super().__init__()
        engine = {"device": str(device)}
        if head is not None:
            engine["head"] = str(head)
        if dtype is not None:
            engine["dtype"] = str(dtype)
        for key, value in options.items():
            if key not in _core.engine_option_keys():
                raise TypeError(f"unknown option {key}=...; the engine's options are: "
                                + ", ".join(_core.engine_option_keys()))
            engine[key] = ("on" if value else "off") if isinstance(value, bool) else str(value)
        self.model = os.fspath(model)
        self._engine, self._skin = engine, float(skin)
        # per-structure inputs read from atoms.info (those the model reads and no keyword fixes)
        self._info_inputs = [k for k in _model_inputs(self.model) if k not in engine]
        self._inputs = {}
        self.session = _core.Session(self.model, engine, self._skin)

    def check_state(self, atoms, tol=1e-15):
        """ASE's changes, and a change of the per-structure inputs read from atoms.info."""
        changes = super().check_state(atoms, tol)
        if self.atoms is not None and any(atoms.info.get(k) != self.atoms.info.get(k) for k in self._info_inputs):
            changes.append("info")
        return changes

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        atoms = self.atoms
        periodic = bool(np.all(atoms.pbc))
        if ("stress" in properties or "stresses" in properties) and not periodic:
            raise PropertyNotImplementedError("stress needs a cell periodic in all three directions")
        per_atom = "energies" in properties or "stresses" in properties
        inputs = {k: str(atoms.info[k]) for k in self._info_inputs if k in atoms.info}
        if inputs != self._inputs:  # (the model is folded for its inputs when loaded: load it anew)
            self.session = _core.Session(self.model, {**self._engine, **inputs}, self._skin)
            self._inputs = inputs
        r = self.session.compute(np.asarray(atoms.numbers, dtype=np.int32), np.asarray(atoms.positions, dtype=np.float64),
                                 np.asarray(atoms.cell.array, dtype=np.float64), [bool(p) for p in atoms.pbc], per_atom)
        self.results["energy"] = self.results["free_energy"] = float(r["energy"])
        self.results["forces"] = r["forces"]
        if periodic:
            volume = atoms.get_volume()
            v = r["virial"]
            self.results["stress"] = -np.array([v[0, 0], v[1, 1], v[2, 2], v[1, 2], v[0, 2], v[0, 1]]) / volume
        if per_atom:
            self.results["energies"] = r["energies"]
            if periodic:
                self.results["stresses"] = -r["atom_virial"][:, _TO_ASE_VOIGT] / volume


# A model's per-structure input (docs/model-format.md, system_embeddings) -> its keyword and atoms.info key.
_INPUT_KEYS = {"total_charge": "charge", "total_spin": "spin", "elec_temp": "elec_temp"}


def _model_inputs(path):
    """The keywords of the per-structure inputs a model file reads (from its safetensors header)."""
    import json
    import struct

    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    meta = json.loads(header.get("__metadata__", {}).get("flashmace", "{}"))
    return [_INPUT_KEYS[e["name"]] for e in meta.get("system_embeddings") or []]


def export(model, out, dtype=None):
    """Writes a flashmace model file from a mace-torch model: a live ScaleShiftMACE object or the
    path of a saved .model file (tools/export_mace.py); dtype "float32" / "float64" converts the
    weights (default: keep)."""
    if isinstance(model, (str, os.PathLike)):
        command = [sys.executable, EXPORT_SCRIPT, os.fspath(model), os.fspath(out)]
        if dtype:
            command += ["--dtype", dtype]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise Error(done.stderr.strip() or done.stdout.strip())
        return os.fspath(out)
    sys.path.insert(0, os.path.dirname(EXPORT_SCRIPT))
    try:
        import export_mace
    finally:
        sys.path.pop(0)
    export_mace.export_model(model, os.fspath(out), dtype=dtype)
    return os.fspath(out)
