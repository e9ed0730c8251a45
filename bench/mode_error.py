#!/usr/bin/env python3
"""The error of each numerical mode of the fast path (docs/pair_style.md) against float64.

Evaluates one structure with flashmace-eval: float64 with the exact radial MLP is the truth; then
float64 with `radial spline`, float32 exact and float32 with splines, and on a GPU float32 exact with
each `tf32` setting (no: FP32 cores; auto, the default: the radial MLP's output layer in split TF32;
yes: plain TF32). Prints, per variant, the energy error per atom and the norm-wise relative force
error ||F - F_exact|| / ||F_exact|| (the measure issue-level accuracy targets use), and the table
sizes the engine chose. The structure is an fcc lattice of --element (perturbed, periodic) written
to an extended XYZ file, or --xyz.

    bench/mode_error.py --eval BUILD/bin/flashmace-eval --model mp0-medium-f32.safetensors \\
        --device cuda --cells 6
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

FCC_BASIS = ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5))


def write_fcc_xyz(path, element, a, cells, perturb, seed):
    rng = random.Random(seed)
    lines = []
    for i in range(cells):
        for j in range(cells):
            for k in range(cells):
                for b in FCC_BASIS:
                    x = [(n + f) * a + rng.uniform(-perturb, perturb) for n, f in zip((i, j, k), b)]
                    lines.append(f"{element} {x[0]:.10f} {x[1]:.10f} {x[2]:.10f}")
    L = a * cells
    with open(path, "w") as f:
        f.write(f"{len(lines)}\n")
        f.write(f'Lattice="{L} 0 0 0 {L} 0 0 0 {L}" Properties=species:S:1:pos:R:3 pbc="T T T"\n')
        f.write("\n".join(lines) + "\n")
    return len(lines)


def evaluate(args, xyz, dtype, radial, tf32="auto"):
    cmd = [args.eval, "--model", args.model, "--xyz", xyz, "--device", args.device, "--dtype", dtype,
           "--radial", radial, "--tf32", tf32]
    if radial == "spline" and args.intervals:
        cmd += ["--radial-intervals", str(args.intervals)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"mode_error: {' '.join(cmd)} failed:\n{proc.stderr}")
    said = [line for line in proc.stderr.splitlines() if line.startswith("radial spline:")]
    return json.loads(proc.stdout), said


def flat_forces(result):
    return [c for row in result["forces"] for c in row]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval", required=True, help="the flashmace-eval executable")
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--xyz", help="an extended XYZ file (default: an fcc lattice, below)")
    p.add_argument("--element", default="Cu")
    p.add_argument("--a", type=float, default=3.61)
    p.add_argument("--cells", type=int, default=3)
    p.add_argument("--perturb", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--intervals", type=int, default=0, help="--radial-intervals for the spline runs (0: automatic)")
    p.add_argument("--json", help="also write the rows as JSON")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        xyz = args.xyz
        if not xyz:
            xyz = os.path.join(tmp, "fcc.xyz")
            write_fcc_xyz(xyz, args.element, args.a, args.cells, args.perturb, args.seed)
        truth, _ = evaluate(args, xyz, "float64", "exact")
        atoms = len(truth["forces"])
        f_true = flat_forces(truth)
        norm = math.sqrt(sum(c * c for c in f_true))
        variants = [("float64", "spline", "auto"), ("float32", "exact", "auto"), ("float32", "spline", "auto")]
        if args.device != "cpu":  # tf32 auto is FP32 on the CPU, tf32 yes refused there
            variants[1:2] = [("float32", "exact", "no"), ("float32", "exact", "auto"), ("float32", "exact", "yes")]
        rows = []
        for dtype, radial, tf32 in variants:
            got, said = evaluate(args, xyz, dtype, radial, tf32)
            diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(flat_forces(got), f_true)))
            rows.append({"dtype": dtype, "radial": radial, "tf32": tf32, "atoms": atoms,
                         "energy_error_per_atom": abs(got["energy"] - truth["energy"]) / atoms,
                         "force_error": diff / norm, "tables": said})

    print(f"{atoms} atoms, {args.device}; truth: float64, exact radial MLP (||F|| = {norm:.6g} eV/A)")
    print("| dtype | radial | tf32 | energy error (eV/atom) | force error (norm-wise, relative) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['radial']} | {r['tf32']} | {r['energy_error_per_atom']:.3g} | "
              f"{r['force_error']:.3g} |")
    for r in rows:
        for line in r["tables"]:
            print(f"  {r['dtype']}: {line}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
