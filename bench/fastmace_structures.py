#!/usr/bin/env python3
"""flashmace-bench and FastMACE on the same multi-element structures: random alloys, rock salt,
perovskite (issue 27's table), one table of ms/step with the ratios.

Each structure is built here once per size (cubic cells of a basis, elements drawn at random on fcc
and bcc sites or one per sublattice, positions perturbed by U(-p, p)). It is written as extended XYZ
for `flashmace-bench --xyz` and handed to FastMACE through ../shared/bench/anchors_gpu_bench.py's
part C (`--anchors`). That script builds fcc Cu itself, so its structure builder is replaced for the
run. One process per structure, because FastMACE compiles one family per process. It times whole
MD steps (Langevin 300 K, 0.5 fs) of its default plan on its own random MP-0-medium-shaped model,
or on `--torch-model` (the mace-torch model that `tools/make_random_model.py --torch-model` saved
beside `--model`: then both runners evaluate the same weights). flashmace-bench times energy +
forces steps of `--model`. Only the time per step is compared; with `--torch-model` the table also
gives the relative difference of the two runners' energies at the first step (the same weights and
positions: float32 round-off). FastMACE needs the kit of ../shared/bench/README.md on PYTHONPATH;
`--no-fastmace` runs flashmace-bench alone (the CPU test).

    bench/fastmace_structures.py --bench BUILD/bin/flashmace-bench --model mp0-medium-f32.safetensors \\
        --anchors KIT/anchors_gpu_bench.py --out OUT --sizes 10,25 \\
        --structures fcc:Cu fcc:Cu,Ni,Au fcc:Cu,Ni,Au,Ag,Pd rocksalt:Mg,O perovskite:Sr,Ti,O
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

# Sites of the cubic cell in units of a, and for ordered compounds the sublattice of each site.
BASES = {
    "fcc": ([(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)], None),
    "bcc": ([(0, 0, 0), (0.5, 0.5, 0.5)], None),
    "rocksalt": ([(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5),
                  (0.5, 0, 0), (0, 0.5, 0), (0, 0, 0.5), (0.5, 0.5, 0.5)], [0, 0, 0, 0, 1, 1, 1, 1]),
    "perovskite": ([(0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)], [0, 1, 2, 2, 2]),
}
DEFAULT_A = {"fcc": 3.61, "bcc": 2.87, "rocksalt": 4.21, "perovskite": 3.905}


def parse_structure(text, a=None):
    """'LATTICE:El,El,...[:A]' -> (lattice, symbols, a)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0] not in BASES:
        raise ValueError(f"structure {text!r}: use LATTICE:El,El[:A] with LATTICE one of {', '.join(BASES)}")
    lattice, symbols = parts[0], parts[1].split(",")
    sublattices = BASES[lattice][1]
    if sublattices is not None and len(symbols) != max(sublattices) + 1:
        raise ValueError(f"structure {text!r}: {lattice} needs {max(sublattices) + 1} elements, one per sublattice")
    return lattice, symbols, float(parts[2]) if len(parts) == 3 else (a or DEFAULT_A[lattice])


def build(lattice, symbols, a, cells, perturb=0.05, seed=0):
    """ASE Atoms: cells^3 cubic cells of the lattice, periodic."""
    from ase import Atoms

    sites, sublattices = BASES[lattice]
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    positions = ((grid + np.asarray(sites, float)[None]) * a).reshape(-1, 3)
    if sublattices is None:
        names = [symbols[i] for i in rng.integers(0, len(symbols), len(positions))]
    else:
        names = [symbols[s] for s in sublattices] * (len(positions) // len(sites))
    positions = positions + rng.uniform(-perturb, perturb, positions.shape)
    return Atoms(names, positions=positions, cell=np.eye(3) * cells * a, pbc=True)


def run_flashmace(args, atoms, label, workdir):
    from ase.io import write

    xyz = os.path.join(workdir, f"{label}.xyz")
    write(xyz, atoms, format="extxyz")
    report = os.path.join(workdir, f"{label}.json")
    command = [args.bench, "--model", args.model, "--xyz", xyz, "--device", args.device, "--dtype", args.dtype,
               "--warmup", str(args.warmup), "--steps", str(args.steps), "--no-breakdown", "--json", report]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.isfile(report):
        raise RuntimeError(f"flashmace-bench failed on {label}: {proc.stderr.strip() or proc.stdout.strip()}")
    with open(report) as handle:
        r = json.load(handle)["result"]
    return {"atoms": r["atoms"], "edges": r["edges"], "ms": r["ms_per_step"],
            "peak_mib": r["peak_memory_bytes"] / 2**20, "energy": r["energy"]}


def run_fastmace(args, structure, workdir):
    """FastMACE's part C of the anchors script on this structure, in a process of its own; n -> ms."""
    results = os.path.join(workdir, "fastmace-" + re.sub(r"[^A-Za-z0-9]+", "_", structure) + ".jsonl")
    command = [sys.executable, os.path.abspath(__file__), "--fastmace-child", structure, "--anchors", args.anchors,
               "--sizes", args.sizes, "--perturb", str(args.perturb), "--seed", str(args.seed), "--out", results,
               "--dtype", args.dtype] + (["--torch-model", args.torch_model] if args.torch_model else [])
    proc = subprocess.run(command, capture_output=True, text=True)
    rows = {}
    if os.path.isfile(results):
        for line in open(results):
            record = json.loads(line)
            if record.get("kind") == "step" and record.get("status") == "ok":
                peak = record.get("total_peak_alloc_GiB")
                rows[record["n"]] = {"ms": record["ms_median"], "atoms": record["atoms"], "edges": record.get("edges"),
                                     "peak_mib": peak * 1024 if peak is not None else None,
                                     "energy": record.get("energy_eV")}
    if proc.returncode != 0:
        print(f"FastMACE on {structure}: exit {proc.returncode}\n{proc.stderr[-2000:]}", file=sys.stderr)
    return rows


def fastmace_child(args):
    """Runs inside the child: the anchors script's part C with this structure in place of fcc Cu."""
    import importlib.util

    lattice, symbols, a = parse_structure(args.fastmace_child)
    spec = importlib.util.spec_from_file_location("anchors_gpu_bench", args.anchors)
    anchors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(anchors)
    anchors.make_atoms = lambda n, seed=0: build(lattice, symbols, a, n, args.perturb, args.seed)
    sys.argv = [args.anchors, "--part", "C", "--sizes", args.sizes, "--c-precision", args.dtype, "--out", args.out,
                "--state", args.out + ".state", "--ref", args.out + ".ref", "--no-extra"]
    if args.torch_model:
        sys.argv += ["--save-model", args.torch_model]  # part C loads the model saved there
    anchors.main()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", help="flashmace-bench")
    parser.add_argument("--model", help="the flashmace model file")
    parser.add_argument("--torch-model", default="", help="the mace-torch model FastMACE loads (default: the anchors "
                                                          "script's own random MP-0-medium)")
    parser.add_argument("--anchors", default="", help="../shared/bench/anchors_gpu_bench.py (FastMACE's runner)")
    parser.add_argument("--no-fastmace", action="store_true", help="flashmace-bench only")
    parser.add_argument("--structures", nargs="+", default=["fcc:Cu", "fcc:Cu,Ni,Au"],
                        help="LATTICE:El,El[:A] (fcc, bcc: random alloys; rocksalt, perovskite: one element per "
                             "sublattice)")
    parser.add_argument("--sizes", default="10", help="comma-separated cells per edge of the cubic box")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--perturb", type=float, default=0.05, help="A, uniform per component")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=".")
    parser.add_argument("--fastmace-child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fastmace_child:
        return fastmace_child(args)
    if not args.bench or not args.model:
        parser.error("--bench and --model are required")
    if not args.no_fastmace and not os.path.isfile(args.anchors):
        parser.error("FastMACE runs through ../shared/bench/anchors_gpu_bench.py: give it with --anchors, or "
                     "pass --no-fastmace")
    try:
        structures = [(text, parse_structure(text)) for text in args.structures]
    except ValueError as error:
        parser.error(str(error))
    os.makedirs(args.out, exist_ok=True)
    sizes = [int(n) for n in args.sizes.split(",")]
    rows = []
    for text, (lattice, symbols, a) in structures:
        fastmace = {} if args.no_fastmace else run_fastmace(args, text, args.out)
        for n in sizes:
            label = re.sub(r"[^A-Za-z0-9]+", "_", text) + f"_c{n}"
            ours = run_flashmace(args, build(lattice, symbols, a, n, args.perturb, args.seed), label, args.out)
            theirs = fastmace.get(n)
            rows.append({"structure": text, "cells": n, **ours,
                         "fastmace_ms": theirs["ms"] if theirs else None,
                         "fastmace_edges": theirs["edges"] if theirs else None,
                         "fastmace_peak_mib": theirs["peak_mib"] if theirs else None,
                         "fastmace_energy": theirs["energy"] if theirs else None})
    lines = ["| structure | atoms | edges | flashmace ms/step | flashmace peak MiB | FastMACE ms/MD step | "
             "FastMACE peak MiB | FastMACE / flashmace | energy rel. diff |", "|---|---|---|---|---|---|---|---|---|"]

    def text(value, form):
        return "-" if value is None else format(value, form)

    for r in rows:
        ratio = text(r["fastmace_ms"] / r["ms"] if r["fastmace_ms"] else None, ".2f")
        diff = (abs(r["fastmace_energy"] - r["energy"]) / max(abs(r["energy"]), 1e-300)
                if args.torch_model and r["fastmace_energy"] is not None else None)
        lines.append(f"| {r['structure']} | {r['atoms']} | {r['edges']} | {r['ms']:.2f} | {r['peak_mib']:,.0f} | "
                     f"{text(r['fastmace_ms'], '.2f')} | {text(r['fastmace_peak_mib'], ',.0f')} | {ratio} | "
                     f"{text(diff, '.1e')} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "structures.json"), "w") as handle:
        json.dump(rows, handle, indent=1)
    with open(os.path.join(args.out, "structures.md"), "w") as handle:
        handle.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
