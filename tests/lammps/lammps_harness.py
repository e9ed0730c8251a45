"""Running flashmace-lmp from tests: input decks, data files of reference structures, thermo output."""
import json
import os
import re
import subprocess

import numpy as np

LMP = os.environ.get("FLASHMACE_LMP", "")
SOURCE = os.environ.get("FLASHMACE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(SOURCE, "examples", "lammps")
TINY = os.path.join(SOURCE, "potentials", "testing", "tiny-cuni-random.safetensors")
CUNI_DATA = os.path.join(EXAMPLES, "cuni_fcc108.data")
# Open MPI's mpirun (Debian's): CI runs as root on 2 cores, with up to 4 ranks.
MPIRUN = [os.environ.get("FLASHMACE_MPIRUN", "mpirun"), "--allow-run-as-root", "--oversubscribe", "-np"]

# LAMMPS metal units: pressure (bar) = virial (eV) / volume (A^3) * NKTV2P (force->nktv2p in LAMMPS).
NKTV2P = 1.6021765e6

ELEMENTS = {1: ("H", 1.008), 6: ("C", 12.011), 8: ("O", 15.999), 14: ("Si", 28.0855), 28: ("Ni", 58.6934),
            29: ("Cu", 63.546)}


def lammps_env(threads=1):
    """One LibTorch thread per rank: ranks x threads must not oversubscribe the 2-core CI machines."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_lammps(workdir, deck, nprocs=1, check=True, args=(), timeout=900, exe=None, status=False):
    """Runs `deck` (text) in workdir with flashmace-lmp (or the command `exe`, a list), serially or
    under mpirun; returns stdout+stderr (with status: the exit status and stdout+stderr)."""
    (workdir / "in.deck").write_text(deck)
    cmd = [*MPIRUN, str(nprocs)] if nprocs > 1 else []
    cmd += [*(exe or [LMP]), "-in", "in.deck", "-log", "none", "-echo", "none", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=lammps_env())
    output = proc.stdout + proc.stderr
    (workdir / "lammps.out").write_text(output)  # kept beside the deck for a failure's post-mortem
    if check:
        assert proc.returncode == 0 and "ERROR" not in output, f"{' '.join(cmd)}\n{output[-4000:]}"
    return (proc.returncode, output) if status else output


def run_lammps_error(workdir, deck, nprocs=1, timeout=120, exe=None):
    """Runs a deck that must stop with an error; returns its output after checking that it stopped in
    time with an exit status of its own (no signal, no core dump) and printed one error: error->all
    prints it once for all ranks, error->one once from each rank that found the problem."""
    try:
        output = run_lammps(workdir, deck, nprocs, check=False, timeout=timeout, exe=exe, status=True)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the deck hung: no exit within {timeout} s") from None
    returncode, output = output
    tail = output[-4000:]
    assert 0 < returncode < 128, f"exit status {returncode}: a crash or a signal, not an error\n{tail}"
    for crash in ("exited on signal", "Segmentation fault", "core dumped", "terminate called"):
        assert crash not in output, f"{crash}\n{tail}"
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    # One check raised them all: each rank that found the problem may name its own atom.
    sources = {re.sub(r"^.*\(([^()]+:\d+)\)\s*$", r"\1", line) for line in errors}
    assert len(errors) >= 1 and len(sources) == 1, f"{len(errors)} ERROR lines from {len(sources)} checks\n{tail}"
    return output


def thermo_rows(output):
    """The numeric rows of every thermo block ("Step ..." header to "Loop time"), as one array."""
    rows, in_block = [], False
    for line in output.splitlines():
        words = line.split()
        if words[:1] == ["Step"]:
            in_block = True
            continue
        if in_block:
            try:
                rows.append([float(w) for w in words])
            except ValueError:
                in_block = False
    return np.array(rows)


def lammps_frame(cell):
    """Rotation Q (3x3) taking the reference frame to LAMMPS's: cell @ Q is lower triangular with a
    positive diagonal (rows are lattice vectors: a along x, b in the xy plane). Vectors rotate as
    v @ Q, tensors as Q.T @ T @ Q."""
    q, r = np.linalg.qr(np.asarray(cell, dtype=float).T)
    return q * np.sign(np.diag(r))


def write_data(path, numbers, positions, cell):
    """LAMMPS data file (atom_style atomic) for a periodic structure already in LAMMPS's frame
    (cell lower triangular). Types are the elements in ascending Z; returns their symbols."""
    kinds = sorted({int(z) for z in numbers})
    h = np.asarray(cell, dtype=float)
    frac = np.linalg.solve(h.T, np.asarray(positions, dtype=float).T).T % 1.0
    pos = frac @ h
    f = lambda v: repr(float(v))  # noqa: E731  repr: shortest round-trip text of the double
    lines = ["flashmace test structure", "", f"{len(numbers)} atoms", f"{len(kinds)} atom types", "",
             f"0 {f(h[0, 0])} xlo xhi", f"0 {f(h[1, 1])} ylo yhi", f"0 {f(h[2, 2])} zlo zhi",
             f"{f(h[1, 0])} {f(h[2, 0])} {f(h[2, 1])} xy xz yz", "", "Masses", ""]
    lines += [f"{t + 1} {ELEMENTS[z][1]}" for t, z in enumerate(kinds)]
    lines += ["", "Atoms # atomic", ""]
    lines += [f"{i + 1} {kinds.index(int(z)) + 1} {f(p[0])} {f(p[1])} {f(p[2])}"
              for i, (z, p) in enumerate(zip(numbers, pos))]
    path.write_text("\n".join(lines) + "\n")
    return [ELEMENTS[z][0] for z in kinds]


def write_extxyz(path, numbers, positions, cell, pbc="T T T"):
    """Extended XYZ (flashmace-eval's input) in the reference frame."""
    lattice = " ".join(repr(float(v)) for v in np.asarray(cell).ravel())
    lines = [str(len(numbers)), f'Lattice="{lattice}" Properties=species:S:1:pos:R:3 pbc="{pbc}"']
    lines += [f"{ELEMENTS[int(z)][0]} " + " ".join(repr(float(v)) for v in p) for z, p in zip(numbers, positions)]
    path.write_text("\n".join(lines) + "\n")


def distorted_cuni(seed):
    """Distorted fcc Cu/Ni, 2x2x2 conventional cells (32 atoms) in LAMMPS's frame: numbers, positions, cell."""
    rng = np.random.default_rng(seed)
    cell = np.diag([7.2, 7.3, 7.1])
    frac = (np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)])[:, None, :] +
            np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])[None]).reshape(-1, 3) / 2
    positions = frac @ cell + rng.uniform(-0.05, 0.05, (32, 3))
    numbers = np.where(rng.random(32) < 0.5, 28, 29)
    return numbers, positions, cell


def eval_reference(workdir, model, structure, flags=()):
    """flashmace-eval --path reference (float64 for a float64 model) on a periodic structure (numbers,
    positions, cell), written to workdir/s.xyz: energy, per-atom energies, forces, virial (eV)."""
    numbers, positions, cell = structure
    write_extxyz(workdir / "s.xyz", numbers, positions, cell)
    proc = subprocess.run([os.environ["FLASHMACE_EVAL"], "--model", model, "--xyz", str(workdir / "s.xyz"),
                           "--path", "reference", *flags], capture_output=True, text=True, check=True)
    r = json.loads(proc.stdout)
    return {"energy": r["energy"], "node_energy": np.array(r["node_energy"]), "forces": np.array(r["forces"]),
            "virial": -np.array(r["stress"]) * abs(np.linalg.det(cell))}


# A periodic structure (s.data, write_data) under the pair style with its keywords and one model.
MODEL_DECK = """units metal
atom_style atomic
atom_modify map array
newton on
read_data s.data
pair_style mace/flash {style}
pair_coeff * * {model} {elements}
"""


# The output lines of a one-evaluation deck (after pair_style / pair_coeff): per-atom energies,
# forces and per-atom virials dumped, energy, virial and the per-atom sums in the thermo row;
# read back by step0_results().
STEP0_OUTPUT = """compute pe all pe/atom
compute sa all stress/atom NULL
compute vir all pressure NULL virial
compute sum all reduce sum c_pe c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
dump d all custom 1 atoms.dump id fx fy fz c_pe c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
dump_modify d sort id format float %.17g
thermo_style custom step pe vol c_vir[1] c_vir[2] c_vir[3] c_vir[4] c_vir[5] c_vir[6] &
             c_sum[1] c_sum[2] c_sum[3] c_sum[4] c_sum[5] c_sum[6] c_sum[7]
thermo_modify format float %.17g
run 0
"""


def voigt_to_matrix(v):
    """xx yy zz xy xz yz -> symmetric 3x3."""
    xx, yy, zz, xy, xz, yz = v
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def step0_results(workdir, output, rotate=None):
    """A STEP0_OUTPUT run's energy, per-atom energies, forces, virial (eV) and per-atom virials, in
    LAMMPS's frame or, with rotate (a 3x3 q, reference = LAMMPS @ q.T), rotated back."""
    row = thermo_rows(output)[0]
    volume = row[2]
    dump = np.loadtxt(workdir / "atoms.dump", skiprows=9, ndmin=2)
    q = np.eye(3) if rotate is None else rotate
    rot = lambda m: q @ m @ q.T  # noqa: E731
    return {
        "energy": row[1],
        "node_energy": dump[:, 4],
        "forces": dump[:, 1:4] @ q.T,
        "virial": rot(voigt_to_matrix(row[3:9]) * volume / NKTV2P),
        "sum_pe": row[9],
        # compute stress/atom is minus the per-atom virial, in bar A^3
        "atom_virial_sum": rot(-voigt_to_matrix(row[10:16]) / NKTV2P),
        "atom_virial": np.array([rot(-voigt_to_matrix(v) / NKTV2P) for v in dump[:, 5:11]]),
        "ids": dump[:, 0],
        "volume": volume,
        "output": output,
    }

