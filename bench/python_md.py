#!/usr/bin/env python3
"""ASE molecular dynamics through flashmace.Calculator against mace-torch's MACECalculator on the same
random model and atoms, in one process, and (with --bench) the calculator's overhead over the
engine's own step (flashmace-bench on the same lattice).

The model: tools/make_random_model.py PRESET (default mp0-medium: MACE-MP-0-medium's shape, random
weights), exported for flashmace with flashmace.export; both calculators in --dtype. The atoms: fcc
Cu a = 3.61 A of 4 n^3 atoms (n^3 the cube nearest --atoms / 4), rattled by 0.05 A, velocities of
300 K. Each runner, in a process of its own: VelocityVerlet at 1 fs, --warmup untimed steps (list builds, CUDA-graph
captures, torch warm-up), then --steps timed steps; ms/step is the timed run's wall time per step.

Usage: python_md.py --atoms 108,864 [--device cpu|cuda] [--dtype float32] [--steps 20] [--warmup 3]
                    [--preset mp0-medium] [--bench build/bin/flashmace-bench] [--out DIR]
                    [--runners flashmace,mace]
Writes DIR/python-md.md (a table with the ratios and the commands) and DIR/python-md.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")


def lattice(atoms_wanted, seed=0):
    from ase.build import bulk
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
    n = max(1, round((atoms_wanted / 4) ** (1 / 3)))
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(n)
    atoms.rattle(0.05, seed=seed)
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(seed))
    return atoms


def timed_md(atoms, calc, steps, warmup):
    from ase import units
    from ase.md.verlet import VelocityVerlet
    atoms = atoms.copy()
    atoms.calc = calc
    md = VelocityVerlet(atoms, 1.0 * units.fs)
    md.run(warmup)
    start = time.perf_counter()
    md.run(steps)  # (each step's forces come back to the host: no device work left pending)
    seconds = time.perf_counter() - start
    return 1e3 * seconds / steps, atoms.get_total_energy()


def run_child(args, runner, model_pt, model_file, atoms, workdir):
    """One runner's MD in a process of its own (neither imports the other's libraries; a crash is
    reported with its Python traceback: -X faulthandler)."""
    out = os.path.join(workdir, f"{runner}-{atoms}.json")
    cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--child", runner, "--atoms", str(atoms),
           "--device", args.device, "--dtype", args.dtype, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--model-pt", model_pt, "--model-file", model_file, "--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"python_md.py: the {runner} run with {atoms} atoms failed (exit {proc.returncode}):\n"
                 f"{proc.stdout[-3000:]}{proc.stderr[-6000:]}")
    with open(out) as f:
        return json.load(f)


def child(args):
    """--child RUNNER: the timed MD of one runner; writes {ms_per_step, total_energy, atoms} to --out."""
    import torch
    atoms = lattice(int(args.atoms))
    if args.child == "flashmace":
        import flashmace
        calc = flashmace.Calculator(args.model_file, device=args.device, dtype=args.dtype)
    else:
        from mace.calculators import MACECalculator
        torch.set_default_dtype(torch.float64 if args.dtype == "float64" else torch.float32)
        calc = MACECalculator(models=[torch.load(args.model_pt, weights_only=False)], device=args.device,
                              default_dtype=args.dtype)
    ms, energy = timed_md(atoms, calc, args.steps, args.warmup)
    with open(args.out, "w") as f:
        json.dump({"ms_per_step": ms, "total_energy": energy, "atoms": len(atoms)}, f)
    return 0


def prepare(args, workdir):
    """The random model as a mace-torch file (for mace-torch) and a flashmace file, in a process of its own."""
    model_pt = os.path.join(workdir, f"{args.preset}.pt")
    model_file = os.path.join(workdir, f"{args.preset}.safetensors")
    code = ("import sys, torch; sys.path.insert(0, %r); import make_random_model, export_mace; "
            "m = make_random_model.build(%r, seed=0); torch.save(m, %r); "
            "export_mace.export_model(m, %r, dtype=%r, source='bench/python_md.py (RANDOM WEIGHTS)')"
            % (os.path.join(HERE, "..", "tools"), args.preset, model_pt, model_file, args.dtype))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"python_md.py: making the {args.preset} model failed:\n{proc.stderr[-3000:]}")
    return model_pt, model_file


def bench_step(args, path, atoms, workdir):
    """flashmace-bench on the same lattice: the engine's step on a fixed neighbour list."""
    out = os.path.join(workdir, f"bench-{atoms}.json")
    cmd = [os.path.abspath(args.bench), "--model", path, "--lattice", "fcc", "--a", "3.61", "--atoms", str(atoms),
           "--elements", "Cu", "--device", args.device, "--dtype", args.dtype, "--warmup", str(args.warmup),
           "--steps", str(args.steps), "--no-breakdown", "--json", out]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"python_md.py: flashmace-bench failed:\n{proc.stdout}{proc.stderr}")
    with open(out) as f:
        r = json.load(f)["result"]
    if r["atoms"] != atoms:
        sys.exit(f"python_md.py: flashmace-bench made {r['atoms']} atoms, not {atoms}")
    return r["ms_per_step"], " ".join(cmd)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", required=True, help="comma-separated atom counts (4 n^3 made)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--preset", default="mp0-medium")
    parser.add_argument("--runners", default="flashmace,mace")
    parser.add_argument("--bench", help="flashmace-bench: also the engine's own step and the calculator's overhead")
    parser.add_argument("--out", default=".")
    parser.add_argument("--child", choices=["flashmace", "mace"], help=argparse.SUPPRESS)
    parser.add_argument("--model-pt", help=argparse.SUPPRESS)
    parser.add_argument("--model-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    runners = args.runners.split(",")
    if set(runners) - {"flashmace", "mace"} or "flashmace" not in runners:
        parser.error("--runners: flashmace, optionally with mace")
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="python-md-")
    model_pt, model_file = prepare(args, workdir)
    rows = []
    for wanted in (int(a) for a in args.atoms.split(",")):
        atoms = len(lattice(wanted))
        row = {"atoms": atoms, "device": args.device, "dtype": args.dtype, "steps": args.steps}
        for runner in runners:
            r = run_child(args, runner, model_pt, model_file, atoms, workdir)
            row[f"{runner}_ms_per_step"] = r["ms_per_step"]
            row[f"{runner}_total_energy"] = r["total_energy"]
            print(f"python_md: {atoms} atoms, {runner}: {r['ms_per_step']:.2f} ms/step", flush=True)
        if "mace" in runners:
            row["speedup_over_mace"] = row["mace_ms_per_step"] / row["flashmace_ms_per_step"]
        if args.bench:
            row["bench_ms_per_step"], row["bench_command"] = bench_step(args, model_file, atoms, workdir)
            row["calculator_overhead"] = row["flashmace_ms_per_step"] / row["bench_ms_per_step"] - 1
        rows.append(row)
    write(args, rows, sys.argv)
    return 0


def write(args, rows, argv):
    columns = [("atoms", "atoms", "{}"), ("flashmace ms/step", "flashmace_ms_per_step", "{:.2f}"),
               ("mace-torch ms/step", "mace_ms_per_step", "{:.2f}"), ("speed-up", "speedup_over_mace", "{:.2f}"),
               ("flashmace-bench ms/step", "bench_ms_per_step", "{:.2f}"),
               ("calculator overhead", "calculator_overhead", "{:+.1%}")]
    columns = [c for c in columns if c[1] in rows[0]]
    lines = [f"# ASE MD: flashmace.Calculator and mace-torch's MACECalculator, {args.device}, {args.dtype}", "",
             f"Random {args.preset} model, fcc Cu a = 3.61 A rattled 0.05 A, 300 K, VelocityVerlet 1 fs, "
             f"{args.warmup} warm-up + {args.steps} timed steps per runner, each in a process of its own, one "
             "job. Overhead: the calculator's MD step over flashmace-bench's step on the same lattice.", "",
             "| " + " | ".join(c[0] for c in columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(fmt.format(r[key]) for _, key, fmt in columns) + " |" for r in rows]
    lines += ["", "Made by: " + " ".join(argv), ""]
    with open(os.path.join(args.out, "python-md.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(args.out, "python-md.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
