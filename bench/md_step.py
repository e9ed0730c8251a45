#!/usr/bin/env python3
"""MD at engine speed: the ms per MD step of pair_style mace/flash/kk and mace/flash in LAMMPS against
the engine alone (flashmace-bench) on the same lattice and model, in one table.

Runners, each on the same deck, on every rank count of --ranks (the ranks share the device):
  engine     flashmace-bench --lattice fcc --a 3.61 --atoms N --elements Cu: the engine's ms per step
             on a fixed neighbour list (no MD, no list builds). One process whatever --ranks says: the
             reference the other rows are compared against.
  kk         the Kokkos LAMMPS --lmp with flashmacekkplugin.so, `-k on g 1 -sf kk -pk kokkos newton on
             neigh full` (--device cuda) or `-k on t 1 ...` (--device cpu: Kokkos Serial/OpenMP, what CI
             runs to test this script).
  plain      the same LAMMPS and plugin without -k: pair_style mace/flash.
  plain-lmp  with --plain-lmp (flashmace-lmp, Debian's LAMMPS): mace/flash as users without Kokkos run it.

The deck: fcc Cu (a = 3.61 A) of 4 n^3 atoms, n^3 the cube of cells nearest --atoms (flashmace-bench
makes cubic lattices), positions displaced by up to 0.05 A, velocities from 300 K, NVE with a warm-up
run and then --steps timed steps; `neighbor --skin bin` (2.0 A, LAMMPS's metal default), neighbour
checks every step (`neigh_modify every 1 delay 0 check yes`), thermo every 50 steps, so the timed run
includes the neighbour-list rebuilds LAMMPS decides on (their count is reported). LAMMPS rows are the
Loop time of the timed run per step; the Pair and Neigh columns are its timing breakdown (average over
ranks); on a GPU, host<->device is the pair style's own count from its run report (bytes up + down
per step without a topology build; docs/pair_style.md). Ratios: kk / engine; plain / kk (same ranks) for plain and plain-lmp; with --fastmace-ms
ATOMS:MS,..., FastMACE / kk, the kk style's speed-up over FastMACE's ms/step at that atom count.

With --trace, each one-rank run also records a timeline of a few steps from the middle of its timed
run (FLASHMACE_TRACE, engine/evaluation_trace.h: every kernel, copy and host wait of the process) and
summarises it with trace_summary.py: per step, the device's busy time and its idle time inside and
outside the pair style's evaluation, beside the table (trace-RUNNER-ATOMS.json and .txt). The
profiler slows a process's steps once it has started (bench/RESULTS.md, 2026-12-05 seventh), so
time the table without --trace and trace in a second run.

Writes OUT/md-step.md (the table and the exact commands) and OUT/md-step.json; the decks stay beside
them.

Usage: md_step.py --lmp LMP --plugin flashmacekkplugin.so --bench flashmace-bench --model MODEL
                  --out DIR [--atoms 864,4000] [--ranks 1,2] [--device cuda] [--dtype float32]
                  [--steps 200] [--warmup 10] [--skin 2.0] [--plain-lmp flashmace-lmp]
                  [--fastmace-ms 864:2.60,4000:9.91] [--mpirun "mpirun --allow-run-as-root"] [--trace]
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

import kokkos_style  # bench/kokkos_style.py, beside this script (it imports scaling.py)
import scaling
import trace_summary

DECK = """units metal
atom_style atomic
boundary p p p
lattice fcc 3.61
region box block 0 {n} 0 {n} 0 {n}
create_box 1 box
create_atoms 1 box
mass 1 63.546
displace_atoms all random 0.05 0.05 0.05 4711 units box
pair_style mace/flash device {device} dtype {dtype}
pair_coeff * * {model} Cu
neighbor {skin} bin
neigh_modify every 1 delay 0 check yes
velocity all create 300 4928459 loop geom
fix 1 all nve
thermo {thermo}
run {warmup}
run {steps}
"""

NEIGHBOR_BUILDS = re.compile(r"^Neighbor list builds = (\d+)$", re.MULTILINE)
DANGEROUS_BUILDS = re.compile(r"^Dangerous builds = (\d+)$", re.MULTILINE)
LAMMPS_RUNNERS = ("kk", "plain", "plain-lmp")


TRACED_STEPS = 6


def run_env(args, runner, atoms, ranks, first_evaluation):
    """The environment of a run; with --trace on one rank, FLASHMACE_TRACE over TRACED_STEPS evaluations
    from `first_evaluation`."""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env.pop("FLASHMACE_TRACE", None)
    if args.trace and ranks == 1:
        env["FLASHMACE_TRACE"] = f"{trace_path(args, runner, atoms)}:{first_evaluation}:{TRACED_STEPS}"
    return env


def trace_path(args, runner, atoms):
    return os.path.join(args.out, f"trace-{runner}-{atoms}.json")


def add_trace(args, row):
    """The summary of the run's trace (written by the run) into its row and beside the table."""
    path = trace_path(args, row["runner"], row["atoms"])
    if not os.path.exists(path):
        sys.exit(f"md_step.py: --trace: the {row['runner']} run with {row['atoms']} atoms wrote no trace {path}")
    summary = trace_summary.summarize(trace_summary.load_events(path), top=25, ngaps=10)
    with open(path[: -len(".json")] + ".txt", "w") as f:
        f.write(trace_summary.render(summary) + "\n")
    row["trace"] = summary


def failed(what, output):
    """Exit with the error lines of `output` first (flashmace-bench prints its usage after them), then its tail."""
    errors = [line for line in output.splitlines() if "ERROR" in line]
    sys.exit(f"md_step.py: the {what} failed:\n" + "\n".join(errors) + "\n--- output tail ---\n" + output[-3000:])


def run_engine(args, n, workdir):
    """flashmace-bench on the deck's lattice: 4 n^3 atoms (--atoms 4 n^3 makes n cells per side)."""
    atoms = 4 * n ** 3
    result = os.path.join(workdir, f"engine-{atoms}.json")
    cmd = [os.path.abspath(args.bench), "--model", os.path.abspath(args.model), "--lattice", "fcc", "--a", "3.61",
           "--atoms", str(atoms), "--elements", "Cu", "--perturb", "0.05", "--device", args.device, "--dtype",
           args.dtype, "--warmup", str(args.warmup), "--steps", str(args.steps), "--skin", str(args.skin),
           "--no-breakdown", "--json", result]
    print("md_step:", " ".join(cmd), flush=True)
    # (evaluations: the warm-up's, the first of them with setup, then the timed ones)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                          env=run_env(args, "engine", atoms, 1, args.warmup + args.steps // 2))
    with open(os.path.join(workdir, f"engine-{atoms}.log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        failed(f"engine run with {atoms} atoms", proc.stdout + proc.stderr)
    with open(result) as f:
        engine = json.load(f)
    return {"runner": "engine", "atoms": engine["result"]["atoms"], "ranks": 1, "steps": engine["steps"],
            "ms_per_step": engine["result"]["ms_per_step"], "edges": engine["result"]["edges"],
            "skin_ms_per_step": engine["result"]["skin_ms_per_step"], "hardware": engine["hardware"],
            "neighbor_builds": None, "command": " ".join(cmd)}


def run_lammps(args, runner, n, ranks, workdir):
    """One LAMMPS run of the deck by `runner` (kk, plain or plain-lmp) on `ranks` ranks."""
    plugin = "" if runner == "plain-lmp" else f"plugin load {os.path.abspath(args.plugin)}\n"
    deck = plugin + DECK.format(n=n, device=args.device, dtype=args.dtype, model=os.path.abspath(args.model),
                                skin=args.skin, thermo=args.thermo, warmup=args.warmup, steps=args.steps)
    path = os.path.join(workdir, f"in.{runner}-{4 * n ** 3}-np{ranks}")
    with open(path, "w") as f:
        f.write(deck)
    kokkos = kokkos_style.kokkos_flags(args.device) if runner == "kk" else []
    lmp = args.plain_lmp if runner == "plain-lmp" else args.lmp
    cmd = [*shlex.split(args.mpirun), "-np", str(ranks), os.path.abspath(lmp), "-in", path, "-log", "none", *kokkos]
    print("md_step:", " ".join(cmd), flush=True)
    # (evaluations: the warm-up run's setup and steps, the timed run's setup, then its steps)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                          env=run_env(args, runner, 4 * n ** 3, ranks, args.warmup + 2 + args.steps // 2))
    output = proc.stdout + proc.stderr
    with open(os.path.join(workdir, f"{runner}-{4 * n ** 3}-np{ranks}.log"), "w") as f:
        f.write(output)
    what = f"{runner} run with {4 * n ** 3} atoms on {ranks} rank(s)"
    if proc.returncode != 0 or "ERROR" in output:
        failed(what, output)
    if runner == "kk" and "pair mace/flash/kk" not in output:
        failed(f"{what} (LAMMPS did not build the mace/flash/kk neighbour list)", output)
    sections, loop = kokkos_style.breakdown(output)
    builds, dangerous = NEIGHBOR_BUILDS.findall(output), DANGEROUS_BUILDS.findall(output)
    if not sections or set(sections) != set(kokkos_style.SECTIONS) or not builds or not dangerous:
        failed(f"{what} (no Loop time, timing breakdown or neighbour-list statistics of the timed run)", output)
    steps = int(loop[2])
    return {"runner": runner, "atoms": int(loop[3]), "ranks": int(loop[1]), "steps": steps,
            "ms_per_step": 1e3 * float(loop[0]) / steps,
            "section_ms_per_step": {name: 1e3 * seconds / steps for name, seconds in sections.items()},
            "neighbor_builds": int(builds[-1]), "dangerous_builds": int(dangerous[-1]), "command": " ".join(cmd),
            "deck": deck, "reported_transfers": kokkos_style.reported_transfers(output)}


def add_ratios(rows, fastmace_ms):
    """kk / engine, plain / kk (same atoms and ranks) and FastMACE / kk, each on the row of its numerator
    (FastMACE's on the kk row)."""
    engine = {r["atoms"]: r for r in rows if r["runner"] == "engine"}
    kk = {(r["atoms"], r["ranks"]): r for r in rows if r["runner"] == "kk"}
    for r in rows:
        if r["runner"] == "kk":
            r["kk_over_engine"] = r["ms_per_step"] / engine[r["atoms"]]["ms_per_step"]
            if r["atoms"] in fastmace_ms:
                r["fastmace_ms_per_step"] = fastmace_ms[r["atoms"]]
                r["fastmace_over_kk"] = fastmace_ms[r["atoms"]] / r["ms_per_step"]
        elif r["runner"] != "engine":
            r["plain_over_kk"] = r["ms_per_step"] / kk[(r["atoms"], r["ranks"])]["ms_per_step"]


COLUMNS = ("atoms", "ranks", "runner", "ms/step", "skin-list ms/step", "Pair ms/step", "Neigh ms/step",
           "neighbour builds", "host<->device B/step", "kk / engine", "plain / kk", "FastMACE / kk")


def transfer_cell(r):
    """The run report's bytes per evaluation without a topology build, up + down ("" on a CPU)."""
    t = r.get("reported_transfers")
    return f"{t['htod_bytes']} + {t['dtoh_bytes']}" if t and t["steps"] else ""


def table_cells(r):
    """The table row of `r`, column by column (the test reads the table back against the JSON)."""
    def ms(value):
        return f"{value:.3f}"

    def ratio(key):
        return f"{r[key]:.3f}" if key in r else ""

    sections = r.get("section_ms_per_step")
    return [str(r["atoms"]), str(r["ranks"]), r["runner"], ms(r["ms_per_step"]),
            ms(r["skin_ms_per_step"]) if "skin_ms_per_step" in r else "",
            ms(sections["Pair"]) if sections else "", ms(sections["Neigh"]) if sections else "",
            "" if r["neighbor_builds"] is None else str(r["neighbor_builds"]), transfer_cell(r),
            ratio("kk_over_engine"), ratio("plain_over_kk"), ratio("fastmace_over_kk")]


def write_table(args, rows, path):
    hardware = rows[0]["hardware"]
    lines = [f"# MD at engine speed: mace/flash/kk, mace/flash and the engine, {args.device}, {args.dtype}", "",
             f"Model `{os.path.basename(args.model)}`, fcc Cu a = 3.61 A displaced by up to 0.05 A, NVE from 300 K, "
             f"{args.warmup} warm-up + {args.steps} timed steps, `neighbor {args.skin} bin`, `neigh_modify every 1 "
             f"delay 0 check yes`, thermo every {args.thermo}; hardware: {hardware}.", "",
             "LAMMPS rows: Loop time of the timed run per step, neighbour-list rebuilds included (their count is "
             "`neighbour builds`); Pair and Neigh from its timing breakdown (average over ranks); host<->device: "
             "the bytes up + down per step without a topology build, from the pair style's own run report (on a "
             "GPU; LAMMPS's own copies not included). The engine row "
             "is flashmace-bench on one process on the same lattice: ms per step on a fixed neighbour list, the "
             "reference of kk / engine for every rank count; its skin-list column is flashmace-bench --skin: steps "
             "between list builds on a list with the deck's skin, positions only, results back on the host. The ranks of a run share the device. plain / kk "
             "divides by the kk run of the same ranks"
             + (f"; FastMACE / kk is the kk style's speed-up over FastMACE's ms/step ({args.fastmace_ms})."
                if args.fastmace_ms else "."), "",
             "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(table_cells(r)) + " |" for r in rows]
    traced = [r for r in rows if "trace" in r]
    if traced:
        lines += ["", f"Timelines (--trace: {TRACED_STEPS} steps from the middle of each one-rank run, ms per step; "
                  "device idle split by whether the host was inside the evaluation; trace-RUNNER-ATOMS.txt has "
                  "the kernels, copies, host waits and longest gaps; the profiler slows the steps after it "
                  "starts, so the ms/step above are not those of an untraced run):", "",
                  "| atoms | runner | wall | device busy | idle inside evaluate | idle outside evaluate |",
                  "|---|---|---|---|---|---|"]
        for r in traced:
            t = r["trace"]
            if t["device_activity"]:
                cells = [f"{t[k]:.3f}" for k in ("wall_ms", "device_busy_ms", "device_idle_inside_evaluate_ms",
                                                  "device_idle_outside_evaluate_ms")]
            else:
                cells = [f"{t['wall_ms']:.3f}", "(no device)", "", ""]
            lines.append(f"| {r['atoms']} | {r['runner']} | " + " | ".join(cells) + " |")
    lines += ["", "Commands (the LAMMPS decks are beside this table):", ""]
    lines += [f"    {r['command']}" for r in rows]
    lines += ["", "Made by: " + " ".join(shlex.quote(a) for a in sys.argv), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def parse_fastmace(text):
    """"864:2.60,4000:9.91" -> {864: 2.6, 4000: 9.91}"""
    try:
        return {int(atoms): float(ms) for atoms, ms in (item.split(":") for item in text.split(",") if item)}
    except ValueError:
        sys.exit(f"md_step.py: --fastmace-ms wants ATOMS:MS,... (e.g. 864:2.60,4000:9.91), not {text!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lmp", required=True, help="a LAMMPS with KOKKOS and PLUGIN (tools/build_kokkos_lammps.sh)")
    parser.add_argument("--plugin", required=True, help="flashmacekkplugin.so built against that LAMMPS")
    parser.add_argument("--bench", required=True, help="flashmace-bench")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--atoms", default="864,4000", help="comma-separated atom counts (each made 4 n^3)")
    parser.add_argument("--ranks", default="1,2", help="comma-separated rank counts, all on one device")
    parser.add_argument("--device", default="cuda", help="cuda (kk on the GPU) or cpu (Kokkos on the host)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--steps", type=int, default=200, help="timed MD steps (and engine steps)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--skin", type=float, default=2.0, help="neighbour skin in A (2.0: LAMMPS's metal default)")
    parser.add_argument("--thermo", type=int, default=50)
    parser.add_argument("--plain-lmp", default="", help="flashmace-lmp (Debian's LAMMPS): also a plain-lmp row")
    parser.add_argument("--fastmace-ms", default="", help="ATOMS:MS,...: FastMACE's ms/step, for FastMACE / kk")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per rank")
    parser.add_argument("--trace", action="store_true", help=f"a timeline of {TRACED_STEPS} steps of each one-rank "
                        "run, summarised per step (trace_summary.py)")
    args = parser.parse_args()
    if args.trace and args.steps < 2 * TRACED_STEPS:
        sys.exit(f"md_step.py: --trace needs --steps {2 * TRACED_STEPS} or more")
    fastmace_ms = parse_fastmace(args.fastmace_ms)
    runners = [r for r in LAMMPS_RUNNERS if r != "plain-lmp" or args.plain_lmp]
    args.out = os.path.abspath(args.out)  # the runs' working directory, where their decks and results are
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for atoms in (int(a) for a in args.atoms.split(",")):
        n = scaling.cells("strong", atoms, 1)[0]
        group = [run_engine(args, n, args.out)]
        group += [run_lammps(args, runner, n, ranks, args.out) for ranks in (int(r) for r in args.ranks.split(","))
                  for runner in runners]
        if len({r["atoms"] for r in group}) != 1:
            counts = [(r["runner"], r["ranks"], r["atoms"]) for r in group]
            sys.exit(f"md_step.py: the runners disagree on the atom count (runner, ranks, atoms): {counts}")
        rows += group
    add_ratios(rows, fastmace_ms)
    if args.trace:
        for r in rows:
            if r["ranks"] == 1:
                add_trace(args, r)
    for r in rows:
        print("md_step: " + ", ".join(f"{c} {v}" for c, v in zip(COLUMNS, table_cells(r)) if v), flush=True)
    write_table(args, rows, os.path.join(args.out, "md-step.md"))
    with open(os.path.join(args.out, "md-step.json"), "w") as f:
        json.dump({"device": args.device, "dtype": args.dtype, "model": args.model, "steps": args.steps,
                   "warmup": args.warmup, "skin": args.skin, "thermo": args.thermo, "hardware": rows[0]["hardware"],
                   "fastmace_ms_per_step": fastmace_ms, "rows": rows}, f, indent=1)
    print(f"md_step: wrote {os.path.join(args.out, 'md-step.md')} and md-step.json")


if __name__ == "__main__":
    main()
