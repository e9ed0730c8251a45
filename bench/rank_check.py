#!/usr/bin/env python3
"""pair_style mace/flash gives the same numbers on any number of MPI ranks: 1 rank against 2, 4, ...
ranks (on a GPU: all ranks sharing it), on a periodic fcc Cu lattice split across the box.

For each rank count R the same deck runs under `mpirun -np R`: a = 3.61 A, the smallest cube of
cells with at least --atoms atoms, read from a data file (atom IDs in lattice order: create_atoms
would number the atoms rank by rank, so IDs would differ between rank counts), positions displaced
randomly by up to 0.05 A (fixed seed; LAMMPS seeds each atom's displacement by its coordinates),
velocities by `loop geom` (they depend on the coordinates only, not on which rank owns an atom),
newton on, NVE with a 1 fs step, `pair_style mace/flash device DEV dtype float64`. First `run 0`:
step-0 energy, pressure components and per-atom forces (dump sorted by id, %.17g); then
`run --steps`: thermo every --thermo steps and the final positions (unwrapped), velocities and
forces. Every R is compared with the smallest rank count (1 by default):

  step 0      pe relative to itself, pressure components relative to the largest one, forces
              relative to the largest |F| component: each <= 1e-10;
  trajectory  every thermo row as at step 0 (pe, ke, etotal; pressures), and at the last step the
              forces (relative to the largest |F|), velocities (to the largest |v|) and unwrapped
              positions (to the box length): each <= 1e-8.

(The tolerances of tests/lammps/test_rank_invariance.py: the same edges, summed in another order per
rank count, give float64 round-off at step 0, which 100 MD steps amplify far less than 1e-8.)

It also checks the halo-exchange report that the pair style prints at the end of each run on 2 or
more ranks: on the step-0 evaluation every exchanged layer (all but the last) has one forward and
one reverse exchange, each moving one row of node features (the hidden irreps' width) per ghost atom
of all ranks (LAMMPS's "Nghost" average times the ranks: exact while the average's 6 significant
digits, rounded, times the ranks stay within half an atom; the script says when they do not); the
timed run has --steps + 1 exchanges per layer and direction (the setup's evaluation too). The table
shows values and kB per exchange of both runs. One rank must print no report: there the pair style
folds every ghost atom into the owned atom it is a periodic image of, so the engine's graph has no
ghost rows and nothing is exchanged (a report there is a problem; so `--exchange off` changes
nothing on one rank, and the negative control fails on the other rank counts).

Writes OUT/rank-check.md (the table, the commands and the deck), OUT/rank-check.json and
OUT/lammps-npR.log (each run's output); exits 1 when any check fails. `--exchange off` (pair_style's
debugging switch: stale ghost features) must make it fail; the CTest test checks that it does.

Usage: rank_check.py --lmp build/bin/flashmace-lmp --model MODEL --out DIR [--device cuda]
                     [--atoms 20000] [--ranks 1,2,4] [--steps 100] [--thermo 10] [--threads 1]
                     [--mpirun "mpirun --allow-run-as-root --oversubscribe"] [--exchange on|off]
                     [--pair-args "memory 16"] [--element Cu --mass 63.546] [--timeout 1200]
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

DECK = """units metal
atom_style atomic
atom_modify map array
newton on
boundary p p p
# the fcc lattice from a data file: create_atoms numbers atoms rank by rank, so its IDs would
# depend on the rank count; the random displacements depend on the coordinates only
read_data {data}
displace_atoms all random 0.05 0.05 0.05 4711 units box
pair_style mace/flash device {device} dtype float64 exchange {exchange}{pair_args}
pair_coeff * * {model} {element}
neighbor 1.0 bin
timestep 0.001
# loop geom: velocities depend on coordinates only, not on which rank owns an atom
velocity all create 300.0 4928459 mom yes rot yes dist gaussian loop geom
fix nve all nve
thermo_style custom step pe ke etotal press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
thermo {thermo}
# step 0 alone: its forces, and an exchange report of one evaluation with this step's ghost atoms
dump step0 all custom 1 step0.dump id fx fy fz
dump_modify step0 sort id format float %.17g
run 0
undump step0
dump last all custom {steps} last.dump id xu yu zu vx vy vz fx fy fz
dump_modify last sort id format float %.17g
run {steps}
"""
LATTICE = 3.61
THERMO_COLUMNS = ["Step", "PotEng", "KinEng", "TotEng", "Press", "Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz"]
PE, ETOTAL, PRESS = 1, 3, 4
PRESSURE_COMPONENTS = slice(4, 11)

# Float64 round-off at step 0 (~1e-15 relative measured), amplified by MD over 100 steps: far below
# these (tests/lammps/test_rank_invariance.py).
STEP0_RTOL = 1e-10
TRAJECTORY_RTOL = 1e-8

LOOP = re.compile(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms")
TASKS = re.compile(r"CPU use with (\d+) MPI tasks")
NGHOST = re.compile(r"^Nghost:\s+(\S+) ave\s+(\S+) max\s+(\S+) min", re.M)
MODEL_LINE = re.compile(r"(\d+) interactions, hidden irreps (\S+),")
# (kB and ms are "-" for an exchange in place in the model's memory, nothing sent; the pair style no
# longer makes one: one rank folds its ghosts and exchanges nothing)
REPORT_ROW = re.compile(r"^\s+(\d+)\s+(forward|reverse)\s+(\d+)\s+([\d.]+)\s+([\d.]+|-)\s+([\d.]+|-)\s+([\d.]+|-)\s*$")


class RunFailed(Exception):
    pass


def cells_for(atoms):
    """Cells per edge of the smallest cube of fcc cells (4 atoms each) with at least `atoms` atoms."""
    n = max(1, round((atoms / 4) ** (1 / 3)))
    while 4 * n ** 3 < atoms:
        n += 1
    return n


def write_lattice(path, n, element, mass):
    """LAMMPS data file of n^3 fcc cells (a = 3.61 A), atom IDs in lattice order (cell x, y, z, basis)."""
    a = LATTICE
    basis = ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5))  # LAMMPS's fcc basis order
    lines = [f"fcc {element} a = {a} A, {n}^3 cells (bench/rank_check.py)", "", f"{4 * n ** 3} atoms", "1 atom types",
             "", f"0 {n * a!r} xlo xhi", f"0 {n * a!r} ylo yhi", f"0 {n * a!r} zlo zhi", "", "Masses", "",
             f"1 {mass}", "", "Atoms # atomic", ""]
    tag = 0
    for ix in range(n):
        for iy in range(n):
            for iz in range(n):
                for bx, by, bz in basis:
                    tag += 1
                    lines.append(f"{tag} 1 {(ix + bx) * a!r} {(iy + by) * a!r} {(iz + bz) * a!r}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def irreps_dim(irreps):
    """Dimension of an e3nn irreps string such as 128x0e+128x1o."""
    return sum(int(mul) * (2 * int(l) + 1) for mul, l in re.findall(r"(\d+)x(\d+)[eo]", irreps))


def thermo_blocks(output):
    """The rows of each thermo block: from a "Step ..." header to the "Loop time" line, its lines of
    as many numbers as columns (the pair style may log between them, e.g. a new memory plan)."""
    blocks, rows = [], None
    for line in output.splitlines():
        words = line.split()
        if words[:1] == ["Step"]:
            if words != THERMO_COLUMNS:
                raise RunFailed(f"unexpected thermo header: {line.strip()}")
            rows = []
            blocks.append(rows)
        elif line.startswith("Loop time of"):
            rows = None
        elif rows is not None and len(words) == len(THERMO_COLUMNS):
            try:
                rows.append([float(w) for w in words])
            except ValueError:
                pass
    return blocks


def number(text):
    """A report column: a number, or None for "-" (an exchange in place: nothing sent, no own time)."""
    return None if text == "-" else float(text)


def kb_ms(e):
    """An exchange's size and time for the tables: "in place" when it sent nothing."""
    if e["kB"] is None:
        return "in place"
    return f"{e['kB']:.1f} kB" + (f", {e['ms_avg']:.3f} ms" if e["ms_avg"] is not None else "")


def exchange_reports(output):
    """Each halo-exchange report, in output order, as {"LAYER direction": {exchanges, values, kB, ms_avg, ms_max}}."""
    found, current = [], None
    for line in output.splitlines():
        if line.startswith("mace/flash halo exchange"):
            current = {}
            found.append(current)
        elif current is not None and (m := REPORT_ROW.match(line)):
            current[f"{m[1]} {m[2]}"] = {"exchanges": int(m[3]), "values": float(m[4]), "kB": number(m[5]),
                                         "ms_avg": number(m[6]), "ms_max": number(m[7])}
        elif current is not None and not line.startswith("  layer"):
            current = None
    return found


def total_ghosts(ave_text, ranks):
    """Ghost atoms of all ranks from LAMMPS's "Nghost: AVE ave" (6 significant digits): ave x ranks,
    and whether that is exact (the printed ave's last digit, times the ranks, under half an atom)."""
    ave = float(ave_text)
    digits = ave_text.split("e")[0]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    exponent = int(ave_text.split("e")[1]) if "e" in ave_text else 0
    resolution = 10.0 ** (exponent - decimals)  # one unit of the last printed digit
    return round(ave * ranks), 0.5 * resolution * ranks < 0.5


def read_dump(path, columns):
    """The last frame of a LAMMPS custom dump: (timestep, {id: [values of columns]}) in id order."""
    with open(path) as f:
        lines = f.read().splitlines()
    starts = [i for i, line in enumerate(lines) if line == "ITEM: TIMESTEP"]
    if not starts:
        raise RunFailed(f"{path}: no frame")
    first = starts[-1]
    step = int(lines[first + 1])
    count = int(lines[first + 3])
    header = next(i for i in range(first, len(lines)) if lines[i].startswith("ITEM: ATOMS"))
    names = lines[header].split()[2:]
    if names[0] != "id" or names[1:] != columns:
        raise RunFailed(f"{path}: columns {names}, expected id {columns}")
    atoms = {}
    for line in lines[header + 1:header + 1 + count]:
        words = line.split()
        atoms[int(words[0])] = [float(w) for w in words[1:]]
    if len(atoms) != count:
        raise RunFailed(f"{path}: {len(atoms)} atoms read, {count} announced")
    box_lines = lines[first + 5:first + 8]
    box = [float(b.split()[1]) - float(b.split()[0]) for b in box_lines]
    return step, atoms, box


def run_job(cmd, cwd, env, timeout):
    """Runs mpirun in a process group of its own, so that a run out of time ends with all its ranks
    (which would otherwise keep the GPU busy); returns (stdout + stderr, exit status or a reason)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return output, proc.returncode
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                output, _ = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                output = ""
        return output or "", f"stopped after {timeout} s (--timeout)"


def run_one(args, ranks, workdir):
    n = cells_for(args.atoms)
    pair_args = f" {args.pair_args}" if args.pair_args else ""
    data = os.path.join(workdir, "lattice.data")
    if not os.path.exists(data):
        write_lattice(data, n, args.element, args.mass)
    deck = DECK.format(data=data, device=args.device, exchange=args.exchange, pair_args=pair_args,
                       model=os.path.abspath(args.model), element=args.element, thermo=args.thermo, steps=args.steps)
    rundir = os.path.join(workdir, f"np{ranks}")
    os.makedirs(rundir, exist_ok=True)
    with open(os.path.join(rundir, "in.rank_check"), "w") as f:
        f.write(deck)
    cmd = [*shlex.split(args.mpirun), "-np", str(ranks), os.path.abspath(args.lmp), "-in", "in.rank_check",
           "-log", "none"]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print("rank_check:", " ".join(cmd), flush=True)
    output, returncode = run_job(cmd, rundir, env, args.timeout)
    with open(os.path.join(args.out, f"lammps-np{ranks}.log"), "w") as f:
        f.write(f"$ {' '.join(cmd)}\n{output}")
    row = {"ranks": ranks, "command": " ".join(cmd), "deck": deck, "problems": []}
    if returncode != 0 or re.search(r"^ERROR", output, re.M):
        status = returncode if isinstance(returncode, str) else f"exit status {returncode}"
        row["problems"].append(f"the run failed ({status}): "
                               + (" | ".join(re.findall(r"^ERROR.*$", output, re.M)[:3]) or output[-1500:]))
        return row, None
    try:
        row.update(parse_run(args, ranks, output, rundir))
    except (RunFailed, OSError, ValueError, IndexError, StopIteration) as e:
        row["problems"].append(f"could not read the run's output: {e}")
        return row, None
    data = row.pop("_data")
    return row, data


def parse_run(args, ranks, output, rundir):
    blocks = thermo_blocks(output)
    loops = LOOP.findall(output)
    ghosts = NGHOST.findall(output)
    model = MODEL_LINE.search(output)
    if len(blocks) != 2 or len(loops) != 2 or len(ghosts) != 2 or not model:
        raise RunFailed(f"expected 2 thermo blocks, Loop times and Nghost lines and the model line, found "
                        f"{len(blocks)}, {len(loops)}, {len(ghosts)}, {'1' if model else '0'}")
    # (LAMMPS's "procs" are MPI tasks x OpenMP threads)
    seconds, steps, natoms = float(loops[1][0]), int(loops[1][2]), int(loops[1][3])
    tasks = TASKS.findall(output)
    if not tasks or int(tasks[-1]) != ranks or steps != args.steps:
        raise RunFailed(f"LAMMPS reports {tasks[-1] if tasks else '?'} MPI tasks and {steps} steps")
    step0_thermo, trajectory = blocks[0], blocks[1]
    if len(step0_thermo) != 1 or len(trajectory) != args.steps // args.thermo + 1:
        raise RunFailed(f"{len(step0_thermo)} and {len(trajectory)} thermo rows, expected 1 and "
                        f"{args.steps // args.thermo + 1}")
    step, forces0, _ = read_dump(os.path.join(rundir, "step0.dump"), ["fx", "fy", "fz"])
    if step != 0 or len(forces0) != natoms:
        raise RunFailed(f"step0.dump: step {step}, {len(forces0)} atoms")
    step, last, box = read_dump(os.path.join(rundir, "last.dump"),
                                ["xu", "yu", "zu", "vx", "vy", "vz", "fx", "fy", "fz"])
    if step != args.steps or len(last) != natoms:
        raise RunFailed(f"last.dump: step {step}, {len(last)} atoms (expected {args.steps}, {natoms})")
    width = irreps_dim(model[2])
    ghosts0, exact = total_ghosts(ghosts[0][0], ranks)
    ghosts_end, _ = total_ghosts(ghosts[1][0], ranks)
    return {"atoms": natoms, "steps": steps, "loop_s": seconds, "ms_per_step": 1e3 * seconds / steps,
            "interactions": int(model[1]), "hidden_irreps": model[2], "width": width,
            "ghosts_step0": ghosts0, "ghost_count_exact": exact,
            "ghosts_end": ghosts_end, "reports": exchange_reports(output),
            "_data": {"thermo0": step0_thermo, "thermo": trajectory, "forces0": forces0, "last": last, "box": box}}


def max_rel(values, reference, scale):
    return max(abs(a - b) for a, b in zip(values, reference)) / scale if scale > 0 else float("inf")


def thermo_mismatch(rows, reference):
    """Largest difference relative to the reference's scale over all rows: energies relative to
    themselves, pressure components relative to the largest pressure component."""
    if len(rows) != len(reference) or any(r[0] != q[0] for r, q in zip(rows, reference)):
        return float("inf")
    energy = max(abs(r[c] - q[c]) / abs(q[c]) for r, q in zip(rows, reference) for c in range(PE, ETOTAL + 1))
    scale = max(abs(v) for q in reference for v in q[PRESSURE_COMPONENTS])
    pressure = max(abs(a - b) for r, q in zip(rows, reference) for a, b in
                   zip(r[PRESSURE_COMPONENTS], q[PRESSURE_COMPONENTS])) / scale
    return max(energy, pressure)


def atoms_mismatch(atoms, reference, columns, scale):
    """max over atoms and the given columns of |a - b|, over scale; inf when the atom ids differ."""
    if atoms.keys() != reference.keys():
        return float("inf")
    return max(abs(atoms[i][c] - reference[i][c]) for i in reference for c in columns) / scale


def compare(data, ref):
    """Relative errors of one run against the reference run (the same deck on fewer ranks)."""
    (row0,), (ref0,) = data["thermo0"], ref["thermo0"]
    forces0_scale = max(abs(v) for f in ref["forces0"].values() for v in f)
    step0 = {"pe": abs(row0[PE] - ref0[PE]) / abs(ref0[PE]),
             "pressure": max_rel(row0[PRESSURE_COMPONENTS], ref0[PRESSURE_COMPONENTS],
                                 max(abs(v) for v in ref0[PRESSURE_COMPONENTS])),
             "forces": atoms_mismatch(data["forces0"], ref["forces0"], range(3), forces0_scale)}
    last, last_ref = data["last"], ref["last"]
    force_scale = max(abs(v) for a in last_ref.values() for v in a[6:9])
    velocity_scale = max(abs(v) for a in last_ref.values() for v in a[3:6])
    box = max(ref["box"])
    trajectory = {"thermo": thermo_mismatch(data["thermo"], ref["thermo"]),
                  "forces": atoms_mismatch(last, last_ref, range(6, 9), force_scale),
                  "velocities": atoms_mismatch(last, last_ref, range(3, 6), velocity_scale),
                  "positions": atoms_mismatch(last, last_ref, range(0, 3), box)}
    return step0, trajectory


def check_exchange(args, row):
    """Problems with the run's exchange reports (empty when they are right). One rank: none may be
    printed (its ghosts are folded into its atoms: no ghost rows, nothing exchanged)."""
    problems = []
    reports = row["reports"]
    if row["ranks"] == 1:
        if reports:
            return [f"{len(reports)} halo-exchange report(s) in the output, expected none on one rank (its "
                    "ghosts are folded into its own atoms: no ghost rows, nothing to exchange)"]
        return []
    if len(reports) != 2:
        return [f"{len(reports)} halo-exchange report(s) in the output, expected 2 (one per run)"]
    first, timed = reports
    # every layer but the last is exchanged
    expected_keys = sorted(f"{layer} {d}" for layer in range(1, row["interactions"]) for d in ("forward", "reverse"))
    for name, report, exchanges in (("run 0", first, 1), (f"run {args.steps}", timed, args.steps + 1)):
        if sorted(report) != expected_keys:
            problems.append(f"{name}: exchange report rows {sorted(report)}, expected {expected_keys}")
            continue
        for key, entry in report.items():
            if entry["exchanges"] != exchanges:
                problems.append(f"{name}: layer {key}: {entry['exchanges']} exchanges, expected {exchanges}")
    if not problems:
        expected_values = row["ghosts_step0"] * row["width"]
        if not row["ghost_count_exact"]:
            problems.append(f"LAMMPS's Nghost average ({row['ghosts_step0']} ghosts over {row['ranks']} ranks) is "
                            "printed too coarsely to give the exact ghost count; use fewer atoms per rank")
        for key, entry in first.items():
            if entry["values"] != expected_values:
                problems.append(f"run 0: layer {key}: {entry['values']:.1f} values per exchange, expected "
                                f"{row['ghosts_step0']} ghosts x {row['width']} = {expected_values}")
    return problems


def format_err(value):
    return "inf" if value == float("inf") else f"{value:.2e}"


def exchange_cells(row, index):
    reports = row.get("reports") or []
    if row["ranks"] == 1 and not reports and "reports" in row:
        return "none (ghosts folded)"
    if len(reports) <= index:
        return "-"
    return "<br>".join(f"{k}: {e['values']:.0f} values, {kb_ms(e)}" for k, e in sorted(reports[index].items()))


def write_table(args, rows, path):
    ref = rows[0]["ranks"]
    lines = [f"# Rank invariance: pair_style mace/flash, {args.device}, float64", "",
             f"Model `{os.path.basename(args.model)}`, fcc {args.element} a = 3.61 A, {cells_for(args.atoms)}^3 cells, "
             f"positions displaced up to 0.05 A, 300 K (`loop geom`), NVE 1 fs, exchange {args.exchange}. "
             f"Each rank count against {ref} rank(s): step 0 (pe, pressure components, forces) <= {STEP0_RTOL:g}, "
             f"{args.steps} steps (thermo every {args.thermo} steps, last step's forces, velocities, unwrapped "
             f"positions) <= {TRAJECTORY_RTOL:g}, relative (forces to the largest |F|, pressures to the largest "
             "component, velocities to the largest |v|, positions to the box length). Exchange: values (doubles), "
             "kB and average ms per exchange over all ranks, per layer and direction; at step 0 values must equal "
             "LAMMPS's ghost count x the hidden irreps' width. One rank exchanges nothing: it folds every ghost "
             "atom into the owned atom it is a periodic image of (no ghost rows), and prints no report.", "",
             "| ranks | atoms | ghosts (step 0) x width | step 0 pe / press / F | trajectory thermo / F / v / x "
             "| exchange at step 0 | exchange in the timed run (average) | loop s (ms/step) | result |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s0, tr = r.get("step0"), r.get("trajectory")
        step0 = " / ".join(format_err(s0[k]) for k in ("pe", "pressure", "forces")) if s0 else "-"
        traj = " / ".join(format_err(tr[k]) for k in ("thermo", "forces", "velocities", "positions")) if tr else "-"
        ghosts = f"{r['ghosts_step0']} x {r['width']}" if "ghosts_step0" in r else "-"
        loop = f"{r['loop_s']:.2f} ({r['ms_per_step']:.1f})" if "loop_s" in r else "-"
        result = "pass" if not r["problems"] else "**FAIL**"
        lines.append(f"| {r['ranks']} | {r.get('atoms', '-')} | {ghosts} | {step0} | {traj} | {exchange_cells(r, 0)} "
                     f"| {exchange_cells(r, 1)} | {loop} | {result} |")
    failures = [(r["ranks"], p) for r in rows for p in r["problems"]]
    lines += ["", "Result: " + ("PASS" if not failures else "FAIL"), ""]
    lines += [f"- {ranks} rank(s): {p}" for ranks, p in failures]
    lines += ["", "Commands (each in a folder of its own):", ""] + [f"    {r['command']}" for r in rows]
    lines += ["", "Deck:", ""] + ["    " + line for line in rows[0]["deck"].splitlines()]
    lines += ["", "Made by: " + " ".join(shlex.quote(a) for a in sys.argv), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lmp", required=True, help="flashmace-lmp (or an lmp that has the style)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--atoms", type=int, default=20000, help="at least this many atoms (a cube of fcc cells)")
    parser.add_argument("--ranks", default="1,2,4", help="rank counts; each is compared with the smallest")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--thermo", type=int, default=10, help="thermo output every this many steps")
    parser.add_argument("--element", default="Cu")
    parser.add_argument("--mass", type=float, default=63.546, help="atom mass (amu; default Cu's)")
    parser.add_argument("--exchange", choices=("on", "off"), default="on",
                        help="pair_style's exchange keyword (off: the negative control, which must fail)")
    parser.add_argument("--pair-args", default="", help="more pair_style mace/flash keywords, e.g. 'memory 16'")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root --oversubscribe")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per rank")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per run")
    parser.add_argument("--workdir", help="keep the runs' decks and dumps here (default: a temporary folder)")
    args = parser.parse_args()
    ranks = sorted({int(r) for r in args.ranks.split(",")})
    if args.steps < 1 or args.steps % args.thermo:
        sys.exit("rank_check.py: --steps must be a positive multiple of --thermo")
    os.makedirs(args.out, exist_ok=True)

    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = os.path.abspath(args.workdir or tmp)
        for r in ranks:
            row, run_data = run_one(args, r, workdir)
            rows.append(row)
            if run_data is not None:
                data[r] = run_data
            status = "ran" if run_data is not None else "FAILED: " + "; ".join(row["problems"])[:500]
            print(f"rank_check: {r} rank(s) {status}", flush=True)

    ref = ranks[0]
    for row in rows:
        if row["ranks"] not in data:
            continue
        row["problems"] += check_exchange(args, row)
        if ref not in data:
            row["problems"].append(f"no reference: the run on {ref} rank(s) failed")
            continue
        if row["atoms"] != rows[0].get("atoms"):
            row["problems"].append(f"{row['atoms']} atoms, {rows[0].get('atoms')} on {ref} rank(s)")
            continue
        step0, trajectory = compare(data[row["ranks"]], data[ref])
        row["step0"], row["trajectory"] = step0, trajectory
        for name, err in step0.items():
            if not err <= STEP0_RTOL:
                row["problems"].append(f"step 0 {name} differ from {ref} rank(s) by {format_err(err)} relative "
                                       f"(limit {STEP0_RTOL:g})")
        for name, err in trajectory.items():
            if not err <= TRAJECTORY_RTOL:
                row["problems"].append(f"after {args.steps} steps the {name} differ from {ref} rank(s) by "
                                       f"{format_err(err)} relative (limit {TRAJECTORY_RTOL:g})")

    passed = all(not r["problems"] for r in rows)
    stem = os.path.join(args.out, "rank-check")
    with open(stem + ".json", "w") as f:
        json.dump({"passed": passed, "device": args.device, "dtype": "float64", "model": args.model,
                   "atoms_requested": args.atoms, "cells": cells_for(args.atoms), "steps": args.steps,
                   "exchange": args.exchange, "step0_rtol": STEP0_RTOL, "trajectory_rtol": TRAJECTORY_RTOL,
                   "reference_ranks": ref, "rows": rows}, f, indent=1)
    write_table(args, rows, stem + ".md")
    for r in rows:
        s0, tr = r.get("step0"), r.get("trajectory")
        errs = (f"step 0 {format_err(max(s0.values()))}, trajectory {format_err(max(tr.values()))}"
                if s0 else "no comparison")
        exchange = ""
        if r["ranks"] == 1 and "reports" in r and not r["reports"]:
            exchange = (f", no exchange: one rank folds its {r['ghosts_step0']} ghosts into its own atoms and "
                        "exchanges nothing")
        elif len(r.get("reports") or []) > 0:
            exchange = ", exchange " + ", ".join(f"{k} {e['values']:.0f} values ({kb_ms(e)})"
                                                 for k, e in sorted(r["reports"][0].items()))
            exchange += f" for {r['ghosts_step0']} ghosts x {r['width']}"
        print(f"rank_check: {r['ranks']} rank(s), {r.get('atoms', '?')} atoms: {errs}{exchange}: "
              + ("pass" if not r["problems"] else "FAIL"))
        for p in r["problems"]:
            print(f"rank_check:   {p}")
    print(f"rank_check: wrote {stem}.md, .json; {'PASS' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
