#!/usr/bin/env python3
"""flashmace, mace-torch and (optionally) Symmetrix-XL on the CPU: the time of one energy + forces step
of the same model on the same atoms, measured in one run, the runners interleaved.

What runs:
  flashmace    build/bin/flashmace-bench --device cpu on the structure's XYZ file: a fresh process per
               round (model load untimed), 1 warm-up step, then --steps timed steps; its ms/step (the
               median of those steps) is the round's sample.
  flashmace-spline  with --spline: the same with `--radial spline` (the radial MLPs tabulated, opt-in;
               Symmetrix-XL tabulates its radial functions too), to compare like with like.
  mace-torch   the mace-torch model called directly (compute_stress False, training False) on one
               batch built beforehand with mace's own data path (config_from_atoms -> AtomicData ->
               batch), --torch-steps timed steps a round.
  symmetrix    with --symmetrix DIR (a `pip install --target DIR symmetrix-xl==0.1.1
               symmetrix-xl-cpu-avx512==0.1.1`): Symmetrix-XL's ASE calculator (Kokkos OpenMP) on the
               model converted by its extract_mace_data, --steps timed calculate() calls a round, on a
               neighbour list with a 0.1 A skin (kept between steps: the atoms do not move). It always
               adds the stress of a periodic cell; the others compute energy and forces only. Its CPU
               kernels compile once (about 5 minutes on 2 cores; cached in $SYMMETRIX_JIT_CACHE, by default
               ~/.cache/symmetrix).
The neighbour list is built before the timed steps by every runner (flashmace-bench reports its own).
Each Python runner lives in a process of its own (its libraries, its OpenMP runtime), set up and warmed
up once (one untimed step); a round then asks each runner, in turn, for its steps, so that machine
noise falls on all of them alike. --threads N sets OMP_NUM_THREADS for all, and torch's thread count.

The model: tools/make_random_model.py --preset (random weights, default mp0-medium, --seed 0) exported
by tools/export_mace.py in each --dtype; or --model FILE (a flashmace file) with --torch-model FILE (the
mace-torch model it was exported from), or --model alone when make_random_model.py made FILE: the
preset's architecture is then rebuilt and loaded with FILE's weights. The structure: fcc Cu, a = --a,
--cells^3 conventional cells, each coordinate moved by a uniform random amount in [-0.05, 0.05] A (the
recipe of flashmace-bench's own lattice, src/core/lattice.cpp, with numpy's random numbers), written
once as extended XYZ that every runner reads.

The energies must agree (|dE| per atom against flashmace's, at most TOLERANCE[dtype]); the script
prints the table either way, then exits with status 1 if they do not.

Usage: cpu_compare.py [--preset mp0-medium --seed 0 | --model FILE [--torch-model FILE]]
                      [--dtype float32[,float64]] [--cells 6] [--a 3.61] [--threads N] [--rounds 3]
                      [--steps 3] [--torch-steps 1] [--no-torch] [--spline] [--symmetrix DIR]
                      [--bench build/bin/flashmace-bench] [--json FILE]
with the Python that has mace-torch (tools/install_deps.sh's venv), e.g.
  ~/.cache/flashmace/venv/bin/python bench/cpu_compare.py --symmetrix /tmp/sxl-cpu --dtype float32 --rounds 2
"""
import argparse
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
# e3nn 0.4.4 (pinned by MACE) reads its constant tables with torch.load, which torch >= 2.6 refuses by default.
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

RUNNERS = ("flashmace", "flashmace-spline", "mace-torch", "symmetrix")
PERTURBATION = 0.05  # A, as flashmace-bench's --perturb default
STRUCTURE_SEED = 1
SYMMETRIX_SKIN = 0.1  # A: its list then holds the cutoff's pairs and few more (its default 0.5 adds ~10 %)
# |dE| per atom against flashmace. float64: the runners agree to 1e-10 eV/atom (Symmetrix-XL's radial
# splines the largest difference); float32: a step rounds at 1e-7 relative on energies of 1-100 eV per
# atom in different orders of summation.
TOLERANCE = {"float64": 1e-6, "float32": 1e-3}
HEARTBEAT_S = 60  # s between progress lines while Symmetrix-XL compiles


# ---- structure ------------------------------------------------------------------------------------

def fcc_copper(cells, a, seed=STRUCTURE_SEED):
    """Positions (cells^3 x 4 atoms, cell by cell, the last index fastest) and the cubic cell."""
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    corners = np.indices((cells, cells, cells)).reshape(3, -1).T
    sites = (corners[:, None, :] + basis[None, :, :]).reshape(-1, 3) * a
    shake = np.random.default_rng(seed).uniform(-PERTURBATION, PERTURBATION, sites.shape)
    return sites + shake, np.eye(3) * cells * a


def write_xyz(path, positions, cell, symbol="Cu"):
    """Extended XYZ with round-trip precision (17 digits): every runner reads the same doubles."""
    lattice = " ".join(f"{x:.17g}" for x in cell.ravel())
    lines = [str(len(positions)), f'Lattice="{lattice}" Properties=species:S:1:pos:R:3 pbc="T T T"']
    lines += [f"{symbol} {x:.17g} {y:.17g} {z:.17g}" for x, y, z in positions]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- models ---------------------------------------------------------------------------------------

RANDOM_SOURCE = re.compile(r"make_random_model\.py (\S+) --seed (\d+)(?: --elements (\S+))?")


def build_from_preset(args, workdir):
    """The preset's random mace-torch model (saved) and its flashmace export in each dtype."""
    import torch
    import export_mace
    import make_random_model

    print(f"cpu_compare: building the random {args.preset} model (seed {args.seed})", flush=True)
    model = make_random_model.build(args.preset, args.seed)
    torch_model = os.path.join(workdir, f"{args.preset}.model")
    torch.save(model, torch_model)
    source = f"make_random_model.py {args.preset} --seed {args.seed} (RANDOM WEIGHTS)"
    files = {}
    for dtype in args.dtypes:
        files[dtype] = os.path.join(workdir, f"{args.preset}-{dtype}.safetensors")
        export_mace.export_model(model, files[dtype], dtype=dtype, source=source)
    return files, torch_model


def rebuild_torch_model(path, workdir):
    """The mace-torch model of a flashmace file that make_random_model.py made: the preset's
    architecture (from the file's provenance) holding the file's own weights."""
    import torch
    import export_mace
    import make_random_model

    tensors, metadata = export_mace.read_safetensors(path)
    meta = json.loads(metadata.get("flashmace", "{}"))
    source = meta.get("provenance", {}).get("source", "")
    match = RANDOM_SOURCE.search(source)
    if not match or len(meta.get("heads", [])) > 1:
        sys.exit(f"cpu_compare.py: --model {path} was not made by tools/make_random_model.py as a one-head model "
                 f"(its provenance: '{source}'); give the mace-torch model it was exported from with --torch-model")
    preset, seed, elements = match.group(1), int(match.group(2)), match.group(3)
    model = make_random_model.build(preset, seed, elements=make_random_model.parse_elements(elements)
                                    if elements else None)
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key not in tensors or tensors[key].size != value.numel():
                sys.exit(f"cpu_compare.py: --model {path}: tensor {key} does not fit the {preset} architecture; "
                         "give the mace-torch model it was exported from with --torch-model")
            value.copy_(torch.from_numpy(tensors[key]).reshape(value.shape))
    out = os.path.join(workdir, f"{preset}-rebuilt.model")
    torch.save(model, out)
    print(f"cpu_compare: mace-torch model: {preset} (seed {seed}) rebuilt with the weights of {path}", flush=True)
    return out


def prepare_models(args, workdir):
    """({dtype: flashmace file}, mace-torch model file or None)."""
    with warnings.catch_warnings():  # TorchScript's and e3nn's warnings at mace's import say nothing here
        warnings.simplefilter("ignore")
        if not args.model:
            return build_from_preset(args, workdir)
        files = {dtype: args.model for dtype in args.dtypes}
        if args.torch_model:
            return files, args.torch_model
        needs_torch = "mace-torch" in args.runners or "symmetrix" in args.runners
        return files, rebuild_torch_model(args.model, workdir) if needs_torch else None


def convert_for_symmetrix(args, torch_model, workdir):
    """Symmetrix-XL's JSON model (its extract_mace_data) for the structure's element, Cu."""
    sys.path.append(args.symmetrix)  # after the venv's own packages: only symmetrix itself comes from DIR
    try:
        from symmetrix.extract_mace_data import extract_mace_data
    except ImportError as error:
        sys.exit(f"cpu_compare.py: --symmetrix {args.symmetrix}: cannot import symmetrix ({error}); install it "
                 f"with `python -m pip install --target {args.symmetrix} symmetrix-xl==0.1.1 "
                 "symmetrix-xl-cpu-avx512==0.1.1`")
    print("cpu_compare: converting the model for Symmetrix-XL (extract_mace_data)", flush=True)
    start = time.perf_counter()
    out = os.path.join(workdir, "symmetrix-Cu.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            data = extract_mace_data(torch_model, species=[29])
        except (RuntimeError, ValueError) as error:
            sys.exit(f"cpu_compare.py: Symmetrix-XL cannot convert this model ({error}); leave --symmetrix out, or "
                     "take a model it supports (e.g. --preset mp0-medium)")
    with open(out, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    print(f"cpu_compare: converted in {time.perf_counter() - start:.1f} s", flush=True)
    return out


# ---- flashmace-bench ------------------------------------------------------------------------------

def flashmace_round(args, model_file, xyz, dtype, workdir, spline=False):
    """One flashmace-bench process: (ms/step of its --steps steps, energy, atoms, edges)."""
    out = os.path.join(workdir, f"flashmace-{dtype}.json")
    cmd = [args.bench, "--model", model_file, "--xyz", xyz, "--device", "cpu", "--dtype", dtype,
           "--warmup", "1", "--steps", str(args.steps), "--no-breakdown", "--json", out]
    if spline:
        cmd += ["--radial", "spline"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cpu_compare.py: flashmace-bench failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    with open(out) as f:
        r = json.load(f)["result"]
    return {"ms": [r["ms_per_step"]], "energy": r["energy"], "atoms": r["atoms"], "edges": r["edges"]}


# ---- Python runners: one process each, driven over a pipe -----------------------------------------

class Worker:
    """A runner in a process of its own: it sets up, reports {"ready": ...}, then answers each
    "steps K" line with {"ms": [...], "energy": E}. {"progress": text} lines are printed as they come."""

    def __init__(self, args, runner, dtype, model, xyz, workdir):
        self.name = f"{runner} {dtype}"
        self.log = os.path.join(workdir, f"{runner}-{dtype}.log")
        cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--worker", runner,
               "--dtype", dtype, "--worker-model", model, "--worker-xyz", xyz, "--threads", str(args.threads)]
        if args.symmetrix:
            cmd += ["--symmetrix", args.symmetrix]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self.replies = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            message = json.loads(line)
            if "progress" in message:
                print(f"cpu_compare: {self.name}: {message['progress']}", flush=True)
            else:
                self.replies.put(message)
        self.replies.put(None)

    def reply(self):
        message = self.replies.get()
        if message is None:
            self.proc.wait()
            with open(self.log) as f:
                tail = f.read()[-4000:]
            sys.exit(f"cpu_compare.py: the {self.name} runner stopped (exit {self.proc.returncode}); its log "
                     f"{self.log} ends:\n{tail}")
        return message

    def steps(self, count):
        self.proc.stdin.write(f"steps {count}\n")
        self.proc.stdin.flush()
        return self.reply()

    def close(self):
        """End of input ends a ready worker; one still setting up (compiling) is stopped."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()


def mace_torch_runner(model_path, xyz, dtype, threads):
    """(step function -> energy, ready info): the model on a batch built once by mace's data path."""
    import torch
    from ase.io import read
    from mace import data as mace_data
    from mace.tools import torch_geometric, utils

    torch.set_num_threads(threads)
    torch.set_default_dtype(getattr(torch, dtype))
    model = torch.load(model_path, map_location="cpu", weights_only=False).to(getattr(torch, dtype))
    for param in model.parameters():  # as MACECalculator: gradients for the forces only
        param.requires_grad = False
    atoms = read(xyz)
    config = mace_data.config_from_atoms(atoms)
    table = utils.AtomicNumberTable([int(z) for z in model.atomic_numbers])
    data = mace_data.AtomicData.from_config(config, z_table=table, cutoff=float(model.r_max))
    batch = next(iter(torch_geometric.dataloader.DataLoader([data], batch_size=1))).to_dict()

    def step():
        out = model(batch, compute_stress=False, training=False)
        out["forces"].detach().numpy()
        return float(out["energy"].detach()[0])

    return step, {"edges": int(data.edge_index.shape[1]), "versions": _versions("torch", "mace")}


def symmetrix_runner(model_path, xyz, dtype, send):
    """(step function -> energy, ready info): Symmetrix-XL's calculator; its construction compiles
    the CPU kernels the first time (minutes), so a heartbeat reports the time it has taken."""
    from ase.io import read
    from symmetrix import Symmetrix, selected_backend

    done = threading.Event()
    start = time.perf_counter()

    def heartbeat():
        while not done.wait(HEARTBEAT_S):
            send({"progress": f"constructing (compiling its CPU kernels the first time: about 5 minutes, cached "
                              f"afterwards), {time.perf_counter() - start:.0f} s so far"})

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        calc = Symmetrix(model_path, dtype=dtype, neighbor_skin=SYMMETRIX_SKIN)
    finally:
        done.set()
    send({"progress": f"constructed in {time.perf_counter() - start:.0f} s (kernels: {calc.jit_status})"})
    atoms = read(xyz)
    atoms.calc = calc

    def step():
        calc.calculate(atoms, properties=["energy", "forces"], system_changes=[])
        return float(calc.results["energy"])

    backend = (selected_backend() or {}).get("selector", "?")
    return step, {"edges": None, "versions": _versions("symmetrix") + f" ({backend})"}


def _versions(*modules):
    import importlib
    return ", ".join(f"{m} {getattr(importlib.import_module(m), '__version__', '?')}" for m in modules)


def worker_main(args):
    """--worker RUNNER: the protocol on a copy of stdout; fd 1 itself goes to stderr (the log), so that
    native libraries' prints cannot break the protocol."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lock = threading.Lock()

    def send(message):
        with lock:
            channel.write(json.dumps(message) + "\n")

    try:
        if args.worker == "mace-torch":
            step, info = mace_torch_runner(args.worker_model, args.worker_xyz, args.dtype, args.threads)
        else:
            sys.path.append(args.symmetrix)
            step, info = symmetrix_runner(args.worker_model, args.worker_xyz, args.dtype, send)
        start = time.perf_counter()
        energy = step()
        send({"ready": True, "energy": energy, "first_step_s": time.perf_counter() - start, **info})
        for line in sys.stdin:
            times = []
            for _ in range(int(line.split()[1])):
                start = time.perf_counter()
                energy = step()
                times.append(1e3 * (time.perf_counter() - start))
            send({"ms": times, "energy": energy})
    except Exception:
        traceback.print_exc()
        return 1
    return 0


# ---- the comparison -------------------------------------------------------------------------------

def start_workers(args, workers, torch_model, sxl_model, xyz, workdir):
    """Fills {(runner, dtype): Worker} and waits until all are set up (concurrently: set-up is not timed)."""
    for dtype in args.dtypes:
        if "mace-torch" in args.runners:
            workers["mace-torch", dtype] = Worker(args, "mace-torch", dtype, torch_model, xyz, workdir)
        if "symmetrix" in args.runners:
            workers["symmetrix", dtype] = Worker(args, "symmetrix", dtype, sxl_model, xyz, workdir)
    for worker in workers.values():
        ready = worker.reply()
        print(f"cpu_compare: {worker.name} ready (untimed first step {ready['first_step_s']:.2f} s)", flush=True)
        worker.ready = ready


def run_rounds(args, files, workers, xyz, workdir):
    """{(runner, dtype): {"ms": [...], "energies": [...], ...}}: R rounds, each runner in turn."""
    results = {}
    for r in range(1, args.rounds + 1):
        for dtype in args.dtypes:
            for runner in args.runners:
                key = (runner, dtype)
                if runner.startswith("flashmace"):
                    sample = flashmace_round(args, files[dtype], xyz, dtype, workdir, runner == "flashmace-spline")
                else:
                    sample = workers[key].steps(args.torch_steps if runner == "mace-torch" else args.steps)
                record = results.setdefault(key, {"ms": [], "energies": []})
                record["ms"] += sample["ms"]
                record["energies"].append(sample["energy"])
                if runner.startswith("flashmace"):
                    record.update(atoms=sample["atoms"], edges=sample["edges"])
                else:
                    record.update(edges=workers[key].ready["edges"], versions=workers[key].ready["versions"])
                print(f"cpu_compare: round {r}/{args.rounds}: {runner} {dtype}: "
                      f"{', '.join(f'{t:.1f}' for t in sample['ms'])} ms/step", flush=True)
    return results


def summarize(args, results):
    """Rows of the table, in runner order, with the ratio and energy difference against flashmace."""
    rows = []
    for dtype in args.dtypes:
        reference = results["flashmace", dtype]
        atoms = reference["atoms"]
        for runner in args.runners:
            r = results[runner, dtype]
            median = statistics.median(r["ms"])
            de = max(abs(e - reference["energies"][0]) for e in r["energies"]) / atoms
            rows.append({"runner": runner, "dtype": dtype, "atoms": atoms, "edges": r["edges"],
                         "samples_ms": r["ms"], "median_ms": median, "min_ms": min(r["ms"]),
                         "ratio_to_flashmace": median / statistics.median(reference["ms"]),
                         "energy": r["energies"][-1], "energy_diff_per_atom": de,
                         "agrees": de <= TOLERANCE[dtype], "versions": r.get("versions", "")})
    return rows


def hardware(threads):
    model = "unknown CPU"
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model}, {os.cpu_count()} CPUs ({isa}); threads per runner: {threads}"


def table(args, rows, hardware_line):
    lines = ["| runner | dtype | atoms | edges | samples | median ms/step | min ms/step | time / flashmace's | "
             "max abs dE/atom vs flashmace (eV) |", "|---" * 9 + "|"]
    for r in rows:
        edges = r["edges"] if r["edges"] is not None else "-"
        lines.append(f"| {r['runner']} | {r['dtype']} | {r['atoms']} | {edges} | {len(r['samples_ms'])} | "
                     f"{r['median_ms']:.1f} | {r['min_ms']:.1f} | {r['ratio_to_flashmace']:.2f}x | "
                     f"{r['energy_diff_per_atom']:.2e}{'' if r['agrees'] else ' DISAGREE'} |")
    lines.append("")
    lines += [f"{r['runner']} / flashmace ({r['dtype']}): {r['ratio_to_flashmace']:.2f}x"
              for r in rows if r["runner"] != "flashmace"]
    lines.append(f"hardware: {hardware_line}")
    versions = sorted({r["versions"] for r in rows if r["versions"]})
    if versions:
        lines.append("versions: " + "; ".join(versions))
    steps = {"mace-torch": args.torch_steps, "symmetrix": args.steps}
    others = "".join(f"; {runner}: {steps[runner]} a round" for runner in args.runners if runner in steps)
    lines.append(f"{args.rounds} round(s), the runners interleaved; steps timed by flashmace-bench: 1 warm-up + "
                 f"{args.steps} a round (the round's sample: their median){others}")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mp0-medium", help="tools/make_random_model.py preset (without --model)")
    parser.add_argument("--seed", type=int, default=0, help="the preset's weight seed")
    parser.add_argument("--model", help="a flashmace model file instead of the preset")
    parser.add_argument("--torch-model", help="the mace-torch model --model was exported from")
    parser.add_argument("--dtype", default="float32", help="float32, float64 or both: float32,float64")
    parser.add_argument("--cells", type=int, default=6, help="fcc conventional cells per side (6: 864 atoms)")
    parser.add_argument("--a", type=float, default=3.61, help="lattice constant (A)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="timed steps a round: flashmace-bench and symmetrix")
    parser.add_argument("--torch-steps", type=int, default=1, help="timed steps a round: mace-torch")
    parser.add_argument("--no-torch", action="store_true", help="leave mace-torch out")
    parser.add_argument("--spline", action="store_true",
                        help="also run flashmace-bench with --radial spline (opt-in tabulated radial MLPs)")
    parser.add_argument("--symmetrix", metavar="DIR", help="a pip --target folder holding Symmetrix-XL")
    parser.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bin", "flashmace-bench"))
    parser.add_argument("--json", help="also write the rows as JSON")
    parser.add_argument("--worker", choices=["mace-torch", "symmetrix"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-model", help=argparse.SUPPRESS)
    parser.add_argument("--worker-xyz", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dtypes = args.dtype.split(",")
    if args.worker:
        return args
    if set(args.dtypes) - set(TOLERANCE):
        parser.error(f"--dtype {args.dtype}: use float32, float64 or float32,float64")
    if min(args.rounds, args.steps, args.torch_steps, args.cells, args.threads) < 1:
        parser.error("--rounds, --steps, --torch-steps, --cells and --threads must be at least 1")
    if not os.access(args.bench, os.X_OK):
        parser.error(f"--bench {args.bench}: no flashmace-bench there; build it (tools/build.sh) or give its path")
    if args.symmetrix and not os.path.isdir(os.path.join(args.symmetrix, "symmetrix")):
        parser.error(f"--symmetrix {args.symmetrix}: no symmetrix package in it; install it with `python -m pip "
                     f"install --target {args.symmetrix} symmetrix-xl==0.1.1 symmetrix-xl-cpu-avx512==0.1.1`")
    if args.torch_model and not args.model:
        parser.error("--torch-model goes with --model (the flashmace file exported from it)")
    args.runners = [r for r in RUNNERS if r == "flashmace" or (r == "flashmace-spline" and args.spline)
                    or (r == "mace-torch" and not args.no_torch) or (r == "symmetrix" and args.symmetrix)]
    return args


def main(argv=None):
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.worker:
        return worker_main(args)
    args.bench = os.path.abspath(args.bench)
    workdir = tempfile.mkdtemp(prefix="cpu-compare-")
    xyz = os.path.join(workdir, "structure.xyz")
    write_xyz(xyz, *fcc_copper(args.cells, args.a))
    files, torch_model = prepare_models(args, workdir)
    sxl_model = convert_for_symmetrix(args, torch_model, workdir) if args.symmetrix else None
    workers = {}
    try:
        start_workers(args, workers, torch_model, sxl_model, xyz, workdir)
        results = run_rounds(args, files, workers, xyz, workdir)
    finally:
        for worker in workers.values():
            worker.close()
    rows = summarize(args, results)
    hardware_line = hardware(args.threads)
    print(table(args, rows, hardware_line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"hardware": hardware_line, "threads": args.threads, "rounds": args.rounds,
                       "model": args.model or f"{args.preset} --seed {args.seed}", "cells": args.cells, "a": args.a,
                       "rows": rows}, f, indent=1)
    shutil.rmtree(workdir)
    bad = [r for r in rows if not r["agrees"]]
    for r in bad:
        print(f"cpu_compare.py: {r['runner']} {r['dtype']}'s energy differs from flashmace's by "
              f"{r['energy_diff_per_atom']:.3g} eV/atom (> {TOLERANCE[r['dtype']]:g}): they do not run the same "
              "model; check that --torch-model is the model --model was exported from", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
