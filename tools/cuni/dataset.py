"""The Cu-Ni EAM data set: plan -> LAMMPS labels -> deterministic train/valid/test split -> files.

The split is by trajectory, not by frame: frames of one MD run are correlated, and a test frame
whose neighbour in time was trained on would understate the error."""
import hashlib
import json
import os
import shutil
import subprocess

import numpy as np

from . import extxyz
from .lammps_eam import run_trajectories
from .plan import PLANS

# Every tenth trajectory (per kind, in seeded random order, counting on across kinds so that
# kinds with few trajectories still contribute) goes to test, the next to validation.
SPLIT_PATTERN = ("test", "valid") + ("train",) * 8
SPLITS = ("train", "valid", "test")


def split_trajectories(trajectories, seed):
    """{split: [names]}, stratified by kind."""
    rng = np.random.default_rng([seed, 7])
    by_kind = {}
    for t in trajectories:
        by_kind.setdefault(t.kind, []).append(t.name)
    out = {s: [] for s in SPLITS}
    counter = 0
    for kind in sorted(by_kind):
        for name in rng.permutation(by_kind[kind]):
            out[SPLIT_PATTERN[counter % len(SPLIT_PATTERN)]].append(str(name))
            counter += 1
    return out


def lammps_version(lmp):
    proc = subprocess.run([lmp, "-h"], capture_output=True, text=True)
    first = (proc.stdout.strip().splitlines() or ["unknown"])[0]
    return first.strip()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def generate(out_dir, plan="full", seed=2024, eam_file=None, lmp="lmp", jobs=1, keep_work=False):
    """Writes out_dir/{train,valid,test}.xyz and manifest.json; returns the manifest."""
    if not eam_file or not os.path.exists(eam_file):
        raise FileNotFoundError(f"EAM file {eam_file!r} not found (Debian package lammps-data: "
                                "/usr/share/lammps/potentials/CuNi.eam.alloy)")
    if shutil.which(lmp) is None:
        raise FileNotFoundError(f"LAMMPS executable {lmp!r} not found (Debian package lammps)")
    trajectories = PLANS[plan](seed)
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(out_dir, "lammps-work")
    shutil.rmtree(work, ignore_errors=True)
    frames = run_trajectories(trajectories, work, os.path.abspath(eam_file), lmp=lmp, jobs=jobs)
    split = split_trajectories(trajectories, seed)
    counts = {}
    for name in SPLITS:
        selected = [f for traj in split[name] for f in frames[traj]]
        extxyz.write(os.path.join(out_dir, f"{name}.xyz"), selected)
        counts[name] = {"configurations": len(selected), "atoms": int(sum(len(f.species) for f in selected)),
                        "trajectories": len(split[name])}
    kinds = {}
    for t in trajectories:
        kinds[t.kind] = kinds.get(t.kind, 0) + t.frames
    manifest = {"plan": plan, "seed": seed, "lammps": lammps_version(lmp), "eam_file": os.path.basename(eam_file),
                "eam_sha256": sha256(eam_file), "configurations_per_kind": kinds, "splits": counts,
                "keys": {"energy": extxyz.ENERGY_KEY, "forces": extxyz.FORCES_KEY, "stress": extxyz.STRESS_KEY}}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    if not keep_work:
        shutil.rmtree(work)
    return manifest
