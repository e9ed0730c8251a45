#!/usr/bin/env python3
"""pair_style mace/flash/kk against mace/flash in the same Kokkos LAMMPS: LAMMPS's per-step time
split into its sections (Pair, Neigh, Comm, Modify, Output, Other), side by side, per atom count.

Both styles come from flashmacekkplugin.so (`plugin load`) in one Kokkos `lmp`: the plain style
without `-k`, the kk style with `-k on g 1 -sf kk -pk kokkos newton on neigh full` (--device cuda)
or `-k on t 1 ...` (--device cpu: Kokkos Serial/OpenMP, what CI runs to test this script). The
system is an fcc lattice (a = 3.61 A, positions displaced by up to 0.05 A) of exactly --atoms atoms
where 4 nx ny nz allows it, NVE steps after a warm-up run, neighbour lists rebuilt as LAMMPS decides
(`neighbor 1.0 bin`, default `neigh_modify`). Times are the average over ranks of LAMMPS's "MPI
task timing breakdown" of the timed run, per step.

Writes OUT/kokkos-style.md (the table, kk / plain ratios, the share of the step outside Pair, the
commands) and OUT/kokkos-style.json; the decks stay beside them.

Usage: kokkos_style.py --lmp LMP --plugin flashmacekkplugin.so --model MODEL --atoms 4000,65536
                       --out DIR [--device cuda] [--dtype float32] [--element Cu] [--ranks 1]
                       [--steps 100] [--warmup 10] [--mpirun "mpirun --allow-run-as-root"]
                       [--transfers libcupti_transfers.so [--transfer-steps 20]]
--transfers (CUDA only) adds, per style and size, the bytes copied between host and device per step,
counted by the GPU's driver (CUPTI) rather than derived.
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import scaling  # bench/scaling.py, beside this script

# scaling.py's lattice deck (fcc, displaced, NVE after a warm-up run), the plugin loaded first.
DECK = "plugin load {plugin}\n" + scaling.DECK

SECTIONS = ("Pair", "Neigh", "Comm", "Output", "Modify", "Other")
# The run report's own count (pair_style mace/flash on a GPU, docs/pair_style.md): the copies of the
# evaluations that built no edge topology, and how many evaluations did build one.
REPORTED = re.compile(r"^mace/flash host<->device copies during this run.*?: (?:(\d+) evaluations without an "
                      r"edge-topology build, (\d+) bytes each \((\d+) bytes to the device, (\d+) bytes to the "
                      r"host\) in ([0-9.]+) copies)?(?:; )?(?:(\d+) with one)?", re.MULTILINE)
# "Pair    | 0.1 | 0.2 | 0.3 |  1.0 | 50.00"; Other has only its average: "Other   |  | 0.01 |  |  | 0.50"
ROW = re.compile(r"^(Pair|Neigh|Comm|Output|Modify|Other)\s*\|[^|]*\|\s*([0-9.eE+-]+)\s*\|", re.MULTILINE)


def cells(atoms):
    """(nx, ny, nz) with 4 nx ny nz == atoms and the sides as equal as possible; else the cube nearest."""
    if atoms % 4 == 0:
        n, best = atoms // 4, None
        for nx in range(1, round(n ** (1 / 3)) + 2):
            if n % nx:
                continue
            for ny in range(nx, round((n // nx) ** 0.5) + 2):
                if (n // nx) % ny == 0:
                    nz = n // nx // ny
                    if nz >= ny and (best is None or nz - nx < best[2] - best[0]):
                        best = (nx, ny, nz)
        if best and best[2] <= 2 * best[0]:
            return best
    n = max(1, round((atoms / 4) ** (1 / 3)))
    return n, n, n


def kokkos_flags(device):
    """The lmp options that turn mace/flash into mace/flash/kk on `device` (cuda: one GPU per rank)."""
    return ["-k", "on", *(["g", "1"] if device.startswith("cuda") else ["t", "1"]), "-sf", "kk",
            "-pk", "kokkos", "newton", "on", "neigh", "full"]


def breakdown(output):
    """Seconds per section (average over ranks) of the last timing breakdown, and its Loop line."""
    loops = scaling.LOOP.findall(output)
    last = output.rfind("MPI task timing breakdown")
    if not loops or last < 0:
        return None, None
    sections = {name: float(avg) for name, avg in ROW.findall(output[last:])}
    return sections, loops[-1]


def run_style(args, style, atoms, workdir, steps=None, env=None):
    """One LAMMPS run of `steps` timed steps (default --steps) with extra environment `env`."""
    steps = args.steps if steps is None else steps
    nx, ny, nz = cells(atoms)
    deck = DECK.format(plugin=os.path.abspath(args.plugin), nx=nx, ny=ny, nz=nz, device=args.device,
                       dtype=args.dtype, model=os.path.abspath(args.model), element=args.element, steps=steps,
                       warmup=args.warmup)
    path = os.path.join(workdir, f"in.{style}-{atoms}" + ("" if steps == args.steps else f"-{steps}steps"))
    with open(path, "w") as f:
        f.write(deck)
    kokkos = kokkos_flags(args.device) if style == "kk" else []
    cmd = [*shlex.split(args.mpirun), "-np", str(args.ranks), os.path.abspath(args.lmp), "-in", path, "-log", "none",
           *kokkos]
    print("kokkos_style:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS=str(args.threads), **(env or {})))
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 or "ERROR" in output:
        sys.exit(f"kokkos_style.py: the {style} run with {atoms} atoms failed:\n{output[-3000:]}")
    if style == "kk" and "pair mace/flash/kk" not in output:
        sys.exit(f"kokkos_style.py: LAMMPS did not build the mace/flash/kk neighbour list:\n{output[-3000:]}")
    reported = reported_transfers(output)
    sections, loop = breakdown(output)
    if not sections or set(sections) != set(SECTIONS):
        sys.exit(f"kokkos_style.py: no complete timing breakdown in the {style} run's output:\n{output[-3000:]}")
    steps, natoms = int(loop[2]), int(loop[3])
    per_step = {name: 1e3 * sections[name] / steps for name in SECTIONS}
    return {"style": style, "atoms": natoms, "ranks": int(loop[1]), "steps": steps, "loop_s": float(loop[0]),
            "ms_per_step": 1e3 * float(loop[0]) / steps, "section_ms_per_step": per_step,
            "outside_pair": 1 - per_step["Pair"] / sum(per_step.values()), "command": " ".join(cmd), "deck": deck,
            "reported_transfers": reported}


def reported_transfers(output):
    """The timed run's own count of host<->device copies (the last report; None on a CPU, where the
    style prints none): evaluations without a topology build and their bytes each, and those with one."""
    found = REPORTED.findall(output)
    if not found:
        return None
    steps, total, htod, dtoh, copies, builds = found[-1]
    return {"steps": int(steps or 0), "bytes": int(total or 0), "htod_bytes": int(htod or 0),
            "dtoh_bytes": int(dtoh or 0), "copies": float(copies or 0), "build_steps": int(builds or 0)}


def copies(args, style, atoms, workdir, steps):
    """Bytes and copies between host and device of one run, all processes summed, as counted by the
    CUPTI injection library (bench/cupti_transfers.cpp) each process loads at cuInit; and the run's
    own report of them."""
    prefix = os.path.join(workdir, f"transfers.{style}-{atoms}-{steps}")
    for old in glob.glob(prefix + ".*"):
        os.remove(old)
    run = run_style(args, style, atoms, workdir, steps,
                    env={"CUDA_INJECTION64_PATH": os.path.abspath(args.transfers), "FLASHMACE_TRANSFERS_OUT": prefix})
    files = glob.glob(prefix + ".*")
    if len(files) < args.ranks:
        sys.exit(f"kokkos_style.py: {len(files)} transfer counts for {args.ranks} rank(s) ({prefix}.*): did CUDA "
                 f"load {args.transfers}?")
    totals = {}
    for name in files:
        for item in open(name).read().split():
            key, value = item.split("=")
            totals[key] = totals.get(key, 0) + int(value)
    return totals, run["reported_transfers"]


def copies_per_step(args, style, atoms, workdir):
    """Host<->device traffic per MD step: the difference of a run of 2 S and one of S timed steps
    (same setup and warm-up), divided by S, so loading, setup and the first neighbour list cancel.
    Beside it, the longer run's own report (the style's and engine's copies per evaluation without a
    topology build; LAMMPS's own copies are CUPTI's only)."""
    (short, _), (long, reported) = (copies(args, style, atoms, workdir, n)
                                    for n in (args.transfer_steps, 2 * args.transfer_steps))
    per_step = {key: (long[key] - short[key]) / args.transfer_steps for key in long}
    per_step.update({f"setup_{key}": short[key] - args.transfer_steps * per_step[key] for key in long})
    per_step["reported"] = reported
    return per_step


def write_table(args, rows, path):
    lines = [f"# pair_style mace/flash/kk and mace/flash, {args.device}, {args.dtype}, {args.ranks} rank(s)", "",
             f"Model `{os.path.basename(args.model)}`, fcc {args.element} a = 3.61 A, {args.warmup} warm-up + "
             f"{args.steps} timed NVE steps; ms per step of each section (LAMMPS's timing breakdown, "
             "average over ranks).", "",
             "| atoms | style | ms/step | " + " | ".join(SECTIONS) + " | outside Pair | kk / plain |",
             "|---" * (len(SECTIONS) + 5) + "|"]
    for plain, kk in rows:
        for r in (plain, kk):
            ratio = f"{kk['ms_per_step'] / plain['ms_per_step']:.3f}" if r is kk else ""
            lines.append(f"| {r['atoms']} | {r['style']} | {r['ms_per_step']:.3f} | "
                         + " | ".join(f"{r['section_ms_per_step'][s]:.3f}" for s in SECTIONS)
                         + f" | {100 * r['outside_pair']:.1f} % | {ratio} |")
    if args.transfers:
        lines += ["", f"Copies between host and device per step, all ranks (CUPTI memcpy records; runs of "
                  f"{args.transfer_steps} and {2 * args.transfer_steps} timed steps, difference / "
                  f"{args.transfer_steps}; neighbour-list rebuilds included at their rate). DtoD stays on the GPU.", "",
                  "| atoms | style | HtoD bytes/step | HtoD copies/step | DtoH bytes/step | DtoH copies/step "
                  "| DtoD bytes/step | setup HtoD bytes | setup DtoH bytes | reported HtoD / DtoH bytes per step "
                  "| reported steps with a topology build |", "|---" * 11 + "|"]
        for pair in rows:
            for r in pair:
                t = r["copies_per_step"]
                own = t["reported"]
                mine = f"{own['htod_bytes']} / {own['dtoh_bytes']} | {own['build_steps']}" if own else "- | -"
                lines.append(f"| {r['atoms']} | {r['style']} | {t['htod_bytes']:.0f} | {t['htod_copies']:.1f} | "
                             f"{t['dtoh_bytes']:.0f} | {t['dtoh_copies']:.1f} | {t['dtod_bytes']:.0f} | "
                             f"{t['setup_htod_bytes']:.0f} | {t['setup_dtoh_bytes']:.0f} | {mine} |")
        lines += ["", "Reported: the run's own count (pair_style mace/flash's report: the style's and the engine's "
                  "copies per evaluation without an edge-topology build; LAMMPS's own copies are in CUPTI's "
                  "columns only)."]
    lines += ["", "Commands (the decks are beside this table):", ""]
    lines += [f"    {r['command']}" for pair in rows for r in pair]
    lines += ["", "Made by: " + " ".join(shlex.quote(a) for a in sys.argv), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lmp", required=True, help="a LAMMPS with KOKKOS and PLUGIN (tools/build_kokkos_lammps.sh)")
    parser.add_argument("--plugin", required=True, help="flashmacekkplugin.so built against that LAMMPS")
    parser.add_argument("--model", required=True)
    parser.add_argument("--atoms", default="4000,65536", help="comma-separated atom counts")
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda", help="cuda (kk on the GPU) or cpu (Kokkos on the host)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--element", default="Cu")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per rank")
    parser.add_argument("--transfers", default="", help="libcupti_transfers.so (bench/cupti_transfers.cpp): also "
                        "count host<->device copies per step (two more runs per style and size)")
    parser.add_argument("--transfer-steps", type=int, default=20, help="S of the transfer runs (S and 2 S steps)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for atoms in (int(a) for a in args.atoms.split(",")):
        rows.append((run_style(args, "plain", atoms, args.out), run_style(args, "kk", atoms, args.out)))
        plain, kk = rows[-1]
        if args.transfers:
            for r in rows[-1]:
                r["copies_per_step"] = copies_per_step(args, r["style"], atoms, args.out)
                t = r["copies_per_step"]
                print(f"kokkos_style: {r['atoms']} atoms, {r['style']}: per step {t['htod_bytes']:.0f} bytes host to "
                      f"device ({t['htod_copies']:.1f} copies), {t['dtoh_bytes']:.0f} bytes device to host "
                      f"({t['dtoh_copies']:.1f} copies); its own report: {t['reported']}", flush=True)
        print(f"kokkos_style: {kk['atoms']} atoms: plain {plain['ms_per_step']:.3f} ms/step, kk "
              f"{kk['ms_per_step']:.3f} ms/step (kk / plain {kk['ms_per_step'] / plain['ms_per_step']:.3f}), "
              f"outside Pair: plain {100 * plain['outside_pair']:.1f} %, kk {100 * kk['outside_pair']:.1f} %",
              flush=True)
    write_table(args, rows, os.path.join(args.out, "kokkos-style.md"))
    with open(os.path.join(args.out, "kokkos-style.json"), "w") as f:
        json.dump({"rows": [r for pair in rows for r in pair]}, f, indent=1)
    print(f"kokkos_style: wrote {os.path.join(args.out, 'kokkos-style.md')}")


if __name__ == "__main__":
    main()
