"""Labels from LAMMPS: runs Debian's `lmp` with pair_style eam/alloy on trajectories and reads
back energies, forces and virial stresses.

One trajectory is one block of a LAMMPS input deck (`clear` ... ): read the structure, thermalize
it with a Langevin thermostat (seeded, so serial runs repeat bit for bit), then alternate `run n`
and one labelled frame. Several trajectories share one `lmp` process (its start-up costs more
than a short EAM run); independent processes run side by side.

Stress convention (what mace-torch and ASE expect): sigma = (1/V) dE/d(strain) in eV/A^3, so a
compressed cell has negative stress. LAMMPS reports the virial part of the pressure tensor,
P = -sigma, in bar (metal units): sigma = -P / NKTV2P."""
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .structures import CU, NI, Structure

NKTV2P = 1.6021765e6  # bar per eV/A^3 (LAMMPS force->nktv2p in metal units)
TYPE_OF = {CU: 1, NI: 2}  # LAMMPS atom types; pair_coeff maps them to the EAM file's Cu and Ni
SPECIES_OF_TYPE = {1: CU, 2: NI}
MASSES = {1: 63.546, 2: 58.6934}
TIMESTEP_PS = 0.001
THERMOSTAT_DAMP_PS = 0.1


@dataclass
class Trajectory:
    """What LAMMPS does with one starting structure. temperature 0 with equilibrate_steps 0 and
    one frame labels the structure as given (cold, rattled configurations)."""
    name: str
    kind: str               # config_type in the data set
    structure: Structure
    temperature: float      # K, thermostat target
    frames: int             # labelled frames
    interval: int           # MD steps between frames
    equilibrate_steps: int  # MD steps before the first frame
    seed: int               # LAMMPS velocity and thermostat seed (1 .. 2**31 - 1)
    melt_temperature: float = 0.0  # K: if set, first run equilibrate_steps at this temperature
    info: dict = field(default_factory=dict)  # extra key=value pairs for the extended XYZ header


@dataclass
class Frame:
    kind: str
    species: np.ndarray
    positions: np.ndarray
    cell: np.ndarray
    energy: float          # eV
    forces: np.ndarray     # eV/A
    stress: np.ndarray     # (6,) Voigt xx yy zz yz xz xy, eV/A^3, ASE sign convention
    info: dict


def lammps_frame(structure):
    """The same structure rotated into LAMMPS's restricted triclinic frame (a along x, b in the xy
    plane: the cell is lower triangular with a positive diagonal). The model is rotation
    equivariant, so the data set stores the rotated copy."""
    q, r = np.linalg.qr(structure.cell.T)
    rotation = q * np.sign(np.diag(r))
    cell = structure.cell @ rotation
    cell[np.abs(cell) < 1e-12] = 0.0
    frac = np.linalg.solve(cell.T, (structure.positions @ rotation).T).T % 1.0
    return Structure(structure.species.copy(), frac @ cell, cell)


def write_data(path, structure):
    s = lammps_frame(structure)
    h = s.cell
    def f(v):
        return repr(float(v))  # shortest text that reads back as the same double

    lines = ["Cu-Ni EAM training structure", "", f"{len(s)} atoms", "2 atom types", "",
             f"0 {f(h[0, 0])} xlo xhi", f"0 {f(h[1, 1])} ylo yhi", f"0 {f(h[2, 2])} zlo zhi",
             f"{f(h[1, 0])} {f(h[2, 0])} {f(h[2, 1])} xy xz yz", "", "Masses", "",
             f"1 {MASSES[1]}", f"2 {MASSES[2]}", "", "Atoms # atomic", ""]
    lines += [f"{i + 1} {TYPE_OF[int(z)]} {f(p[0])} {f(p[1])} {f(p[2])}"
              for i, (z, p) in enumerate(zip(s.species, s.positions))]
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def _thermostat(temperature, seed):
    return f"fix thermostat all langevin {temperature} {temperature} {THERMOSTAT_DAMP_PS} {seed} zero yes"


def deck_block(traj, workdir, eam_file):
    """The input-deck lines of one trajectory; its frames go to NAME.dump and NAME.frames."""
    base = os.path.join(workdir, traj.name)
    write_data(base + ".data", traj.structure)
    lines = ["clear", "units metal", "atom_style atomic", "boundary p p p", "atom_modify map array",
             f"read_data {base}.data", "pair_style eam/alloy", f"pair_coeff * * {eam_file} Cu Ni",
             "neighbor 1.0 bin", "neigh_modify every 1 delay 0 check yes",
             f"timestep {TIMESTEP_PS}",
             # The virial part of the pressure tensor (no kinetic term): the stress label.
             "compute pvir all pressure NULL virial",
             # thermo evaluates pe and pvir on the last step of every run, which makes them
             # current for the print between runs.
             "thermo_style custom step temp pe c_pvir[1] c_pvir[2] c_pvir[3] c_pvir[4] c_pvir[5] c_pvir[6]",
             "thermo 1000000"]
    if traj.temperature > 0:
        start = traj.melt_temperature or traj.temperature
        lines += [f"velocity all create {start} {traj.seed} mom yes rot no dist gaussian", "fix integrate all nve",
                  _thermostat(start, traj.seed + 1)]
        if traj.melt_temperature:
            lines += [f"run {traj.equilibrate_steps}", "unfix thermostat", _thermostat(traj.temperature, traj.seed + 2)]
        lines.append(f"run {traj.equilibrate_steps}")
    fields = " ".join(f"$({q}:%.16g)" for q in
                      ["pe", "c_pvir[1]", "c_pvir[2]", "c_pvir[3]", "c_pvir[4]", "c_pvir[5]", "c_pvir[6]",
                       "lx", "ly", "lz", "xy", "xz", "yz"])
    for k in range(traj.frames):
        if traj.temperature > 0:
            # fix langevin adds its friction and random kicks to the forces LAMMPS reports: label
            # each frame by a `run 0` without it, then go on with a fresh thermostat seed.
            lines += [f"run {traj.interval}", "unfix thermostat"]
        lines += ["run 0",
                  f"write_dump all custom {base}.dump id type x y z fx fy fz "
                  "modify sort id format float %.16g append yes",
                  f'print "{fields}" append {base}.frames screen no']
        if traj.temperature > 0:
            lines.append(_thermostat(traj.temperature, traj.seed + 3 + k))
    return lines


def read_frames(traj, workdir):
    base = os.path.join(workdir, traj.name)
    labels = np.loadtxt(base + ".frames", ndmin=2)
    with open(base + ".dump") as f:
        dump = f.read().split("ITEM: TIMESTEP")[1:]
    if len(labels) != traj.frames or len(dump) != traj.frames:
        raise RuntimeError(f"{traj.name}: LAMMPS wrote {len(labels)} labels and {len(dump)} dumps, "
                           f"expected {traj.frames}")
    frames = []
    for row, text in zip(labels, dump):
        atoms = np.array(text.split("ITEM: ATOMS")[1].split("\n", 1)[1].split(), dtype=float).reshape(-1, 8)
        energy, pressure, (lx, ly, lz, xy, xz, yz) = row[0], row[1:7], row[7:13]
        cell = np.array([[lx, 0.0, 0.0], [xy, ly, 0.0], [xz, yz, lz]])
        # LAMMPS pressure order xx yy zz xy xz yz -> Voigt xx yy zz yz xz xy, and sigma = -P.
        stress = -pressure[[0, 1, 2, 5, 4, 3]] / NKTV2P
        species = np.array([SPECIES_OF_TYPE[int(t)] for t in atoms[:, 1]])
        frames.append(Frame(traj.kind, species, atoms[:, 2:5], cell, float(energy), atoms[:, 5:8], stress,
                            dict(traj.info)))
    return frames


def run_trajectories(trajectories, workdir, eam_file, lmp="lmp", jobs=1):
    """Labels every trajectory; returns {name: [Frame]}. The result does not depend on `jobs`:
    each trajectory is its own seeded block, and the blocks are dealt out round robin."""
    os.makedirs(workdir, exist_ok=True)
    groups = [trajectories[i::jobs] for i in range(jobs) if trajectories[i::jobs]]

    def run_group(index):
        deck = os.path.join(workdir, f"in.group{index}")
        lines = [line for traj in groups[index] for line in deck_block(traj, workdir, eam_file)]
        with open(deck, "w") as f:
            f.write("\n".join(lines) + "\n")
        # Each process its own Open MPI session directory: singletons started side by side share
        # one otherwise, and one that exits removes the (then empty) shared top directory while
        # another is creating its own inside it ("Unable to start a daemon on the local node").
        # Short (under /tmp), since it holds the PMIx rendezvous sockets.
        session = tempfile.mkdtemp(prefix="fm-ompi-")
        env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_orte_tmpdir_base=session)
        try:
            proc = subprocess.run([lmp, "-in", deck, "-log", "none", "-nocite"],
                                  capture_output=True, text=True, env=env)
        finally:
            shutil.rmtree(session, ignore_errors=True)
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr).splitlines()
            errors = [line for line in output if "ERROR" in line or line.startswith("Last command")]
            raise RuntimeError(f"{lmp} failed on {deck} (exit {proc.returncode}):\n"
                               + "\n".join(errors or output[-20:]))

    with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:
        list(pool.map(run_group, range(len(groups))))
    return {traj.name: read_frames(traj, workdir) for traj in trajectories}
