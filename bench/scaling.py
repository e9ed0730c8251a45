#!/usr/bin/env python3
"""Strong and weak scaling of pair_style mace/flash under mpirun, one rank per GPU.

Runs an fcc Cu lattice (a = 3.61 A, positions displaced by up to 0.05 A) with NVE steps after a
warm-up run, for each rank count, and reads LAMMPS's "Loop time" of the timed run. Strong scaling
keeps --atoms in all; weak scaling gives every rank --atoms (the lattice grows along x). Writes
OUT/scaling-MODE.md (the table and the commands that produced it, with their decks OUT/in.MODE-R),
OUT/scaling-MODE.json and
OUT/scaling-MODE.png (atom-steps/s and parallel efficiency against the rank count; efficiency
relative to the smallest rank count: strong T(r0) r0 / (T(r) r), weak T(r0) / T(r)).

With --device cuda every rank takes the GPU of its node-local rank (pair_style's `device cuda`);
with --device cpu the ranks are CPU processes (what CI runs, to test this script).

Usage: scaling.py --lmp build/bin/flashmace-lmp --model MODEL --mode strong|weak --atoms N
                  --ranks 1,2,4,8 --out DIR [--device cuda] [--dtype float32] [--element Cu]
                  [--steps 20] [--warmup 5] [--mpirun "mpirun --allow-run-as-root"] [--threads 1]
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

DECK = """units metal
atom_style atomic
boundary p p p
lattice fcc 3.61
region box block 0 {nx} 0 {ny} 0 {nz}
create_box 1 box
create_atoms 1 box
mass 1 63.546
displace_atoms all random 0.05 0.05 0.05 4711 units box
pair_style mace/flash device {device} dtype {dtype}
pair_coeff * * {model} {element}
neighbor 1.0 bin
velocity all create 300 4928459 loop geom
fix 1 all nve
thermo {steps}
run {warmup}
run {steps}
"""

LOOP = re.compile(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms")


def cells(mode, atoms, ranks):
    """fcc cells (nx, ny, nz), 4 atoms each: a cube near `atoms` atoms (strong), or a cube near
    `atoms` per rank repeated `ranks` times along x (weak)."""
    n = max(1, round((atoms / 4) ** (1 / 3)))
    return (n * ranks, n, n) if mode == "weak" else (n, n, n)


def run_one(args, ranks, workdir):
    nx, ny, nz = cells(args.mode, args.atoms, ranks)
    deck = DECK.format(nx=nx, ny=ny, nz=nz, device=args.device, dtype=args.dtype, model=os.path.abspath(args.model),
                       element=args.element, steps=args.steps, warmup=args.warmup)
    path = os.path.abspath(os.path.join(args.out, f"in.{args.mode}-{ranks}"))  # kept beside the table
    with open(path, "w") as f:
        f.write(deck)
    cmd = [*shlex.split(args.mpirun), "-np", str(ranks), os.path.abspath(args.lmp), "-in", path, "-log", "none"]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print("scaling:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 or "ERROR" in output:
        sys.exit(f"scaling.py: the run on {ranks} rank(s) failed:\n{output[-3000:]}")
    loops = LOOP.findall(output)
    if len(loops) < 2:
        sys.exit(f"scaling.py: no Loop time of the timed run on {ranks} rank(s) in the output:\n{output[-3000:]}")
    seconds, procs, steps, natoms = float(loops[-1][0]), int(loops[-1][1]), int(loops[-1][2]), int(loops[-1][3])
    return {"ranks": procs, "atoms": natoms, "steps": steps, "loop_s": seconds,
            "ms_per_step": 1e3 * seconds / steps, "atom_steps_per_s": natoms * steps / seconds,
            "command": " ".join(cmd), "deck": deck}


def add_efficiency(mode, rows):
    base = rows[0]
    for r in rows:
        if mode == "strong":
            r["efficiency"] = base["loop_s"] * base["ranks"] / (r["loop_s"] * r["ranks"])
        else:
            r["efficiency"] = (base["loop_s"] / base["steps"]) / (r["loop_s"] / r["steps"])


def write_table(args, rows, path):
    per = "per rank" if args.mode == "weak" else "in all"
    lines = [f"# {args.mode.capitalize()} scaling: pair_style mace/flash, {args.device}, {args.dtype}",
             "", f"Model `{os.path.basename(args.model)}`, fcc {args.element} a = 3.61 A, about {args.atoms} atoms {per}, "
             f"{args.warmup} warm-up + {args.steps} timed NVE steps (LAMMPS Loop time of the timed run).", "",
             "| ranks | atoms | ms/step | atom-steps/s | efficiency |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['ranks']} | {r['atoms']} | {r['ms_per_step']:.2f} | {r['atom_steps_per_s']:.4g} | "
                     f"{100 * r['efficiency']:.1f} % |")
    lines += ["", "Commands (the decks are beside this table):", ""] + [f"    {r['command']}" for r in rows]
    lines += ["", "Made by: " + " ".join(shlex.quote(a) for a in sys.argv), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def plot(args, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = [r["ranks"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(ranks, [r["atom_steps_per_s"] for r in rows], "o-")
    left.set_xlabel("ranks (GPUs)" if args.device.startswith("cuda") else "ranks")
    left.set_ylabel("atom-steps/s")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    right.plot(ranks, [100 * r["efficiency"] for r in rows], "o-", label="measured")
    right.axhline(100, color="gray", linestyle="--", label="ideal")
    right.set_xlabel(left.get_xlabel())
    right.set_ylabel("parallel efficiency (%)")
    right.set_xscale("log", base=2)
    right.set_ylim(0, 110)
    right.legend()
    for axis in (left, right):
        axis.set_xticks(ranks)
        axis.set_xticklabels([str(r) for r in ranks])
        axis.minorticks_off()
    fig.suptitle(f"{args.mode} scaling, {args.atoms} atoms {'per rank' if args.mode == 'weak' else 'in all'}, "
                 f"{args.device} {args.dtype}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lmp", required=True, help="flashmace-lmp (or an lmp that has the style)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", choices=("strong", "weak"), required=True)
    parser.add_argument("--atoms", type=int, required=True, help="strong: in all; weak: per rank")
    parser.add_argument("--ranks", default="1,2,4,8")
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--element", default="Cu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root --oversubscribe")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per rank")
    args = parser.parse_args()
    try:
        import matplotlib  # noqa: F401  (checked before the runs, not after them)
    except ImportError:
        sys.exit("scaling.py: matplotlib is needed for the plot (pip install matplotlib; "
                 "tools/requirements.txt pins it)")
    ranks = sorted({int(r) for r in args.ranks.split(",")})
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        rows = [run_one(args, r, workdir) for r in ranks]
    add_efficiency(args.mode, rows)
    stem = os.path.join(args.out, f"scaling-{args.mode}")
    with open(stem + ".json", "w") as f:
        json.dump({"mode": args.mode, "device": args.device, "dtype": args.dtype, "model": args.model,
                   "atoms": args.atoms, "rows": rows}, f, indent=1)
    write_table(args, rows, stem + ".md")
    plot(args, rows, stem + ".png")
    for r in rows:
        print(f"scaling: {r['ranks']} rank(s), {r['atoms']} atoms: {r['ms_per_step']:.2f} ms/step, "
              f"{r['atom_steps_per_s']:.4g} atom-steps/s, efficiency {100 * r['efficiency']:.1f} %")
    print(f"scaling: wrote {stem}.md, .json, .png")


if __name__ == "__main__":
    main()
