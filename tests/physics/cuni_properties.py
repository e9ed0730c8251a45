"""Material properties of a Cu-Ni potential, computed in LAMMPS on small cells (CPU, serial).

A potential is given by its pair_style/pair_coeff lines (pair_lines), so the EAM reference and a
MACE model go through the same decks in the same program (flashmace-lmp: Debian's LAMMPS with
pair_style mace/flash). Atom type 1 is Cu, type 2 Ni.

Methods (0 K unless said):
  lattice constant  2x2x2 fcc cell (32 atoms), box relaxed isotropically to zero pressure
  bulk modulus      B = -dP/dlnV, central difference at +-0.2% lattice strain around a0
  vacancy energy    3x3x3 cell (108 atoms) at a0: E_f = E(N-1, relaxed) - (N-1)/N E(N)
  mixing energy     3x3x3 random 50% alloy (seeded), positions and box relaxed:
                    E_mix = E_alloy/N - (E_Cu + E_Ni)/2 per atom of the relaxed pure metals
  NVE               2x2x2 random 50% alloy from 2T velocities (equipartition brings it to about
                    T), total energy against time, then quenched and classified by CNA"""
import numpy as np
from cuni_harness import printed, run_lammps

CU, NI = 1, 2
BAR_PER_GPA = 1e4
LATTICE_STRAIN = 0.002  # bulk modulus step: small against anharmonicity, large against round-off
CNA_FCC = 1  # compute cna/atom: 1 = fcc
ALLOY_SEED = 4711


def pair_lines(style, model=None, eam_file=None):
    if style == "eam":
        return f"pair_style eam/alloy\npair_coeff * * {eam_file} Cu Ni\n"
    return f"pair_style mace/flash dtype float64\npair_coeff * * {model} Cu Ni\n"


def _cell(pair, a, reps, alloy=False):
    """Deck head: an fcc cell of type-1 atoms, half of them turned into type 2 if alloy."""
    deck = f"""units metal
atom_style atomic
atom_modify map array
boundary p p p
lattice fcc {a}
region box block 0 {reps} 0 {reps} 0 {reps}
create_box 2 box
create_atoms 1 box
mass 1 63.546
mass 2 58.6934
"""
    if alloy:
        deck += f"set type 1 type/ratio 2 0.5 {ALLOY_SEED}\n"
    return deck + pair + "neighbor 1.0 bin\nthermo_style custom step pe press lx ly lz\n"


_RELAX = "min_modify line quadratic\nminimize 0 1e-10 5000 50000\n"


def equilibrium(pair, element, workdir, exe, a_guess):
    """(a0 in A, energy per atom in eV) of the pure fcc metal (element = CU or NI)."""
    deck = _cell(pair, a_guess, 2) + (f"set type 1 type {element}\n" if element != 1 else "")
    deck += "fix relax all box/relax iso 0.0 vmax 0.001\n" + _RELAX
    deck += 'print "EQ $(lx/2:%.17g) $(pe/atoms:%.17g) $(press:%.17g)"\n'
    a0, e0, press = printed(run_lammps(exe, workdir, deck), "EQ")[0]
    assert abs(press) < 1.0, f"box/relax left {press} bar"
    return a0, e0


def bulk_modulus(pair, element, a0, workdir, exe):
    """B in GPa at a0."""
    pressures = []
    for sign in (1, -1):
        deck = _cell(pair, a0 * (1 + sign * LATTICE_STRAIN), 2)
        deck += (f"set type 1 type {element}\n" if element != 1 else "") + "run 0\n"
        deck += 'print "P $(press:%.17g)"\n'
        pressures.append(printed(run_lammps(exe, workdir, deck), "P")[0][0])
    dlnv = 3 * np.log((1 + LATTICE_STRAIN) / (1 - LATTICE_STRAIN))
    return -(pressures[0] - pressures[1]) / dlnv / BAR_PER_GPA


def vacancy_formation(pair, a0, workdir, exe):
    """E_f in eV of a Cu vacancy in a 108-atom cell at the perfect crystal's lattice constant."""
    deck = _cell(pair, a0, 3) + 'run 0\nprint "PERFECT $(pe:%.17g) $(atoms)"\n'
    deck += "group gone id 1\ndelete_atoms group gone\n" + _RELAX + 'print "VACANCY $(pe:%.17g) $(atoms)"\n'
    out = run_lammps(exe, workdir, deck)
    (e_perfect, n), (e_vacancy, n1) = printed(out, "PERFECT")[0], printed(out, "VACANCY")[0]
    assert n1 == n - 1
    return e_vacancy - (n - 1) / n * e_perfect


def mixing_energy(pair, a_guess, e_cu, e_ni, workdir, exe):
    """E_mix in eV/atom of the relaxed random 50% alloy against the relaxed pure metals."""
    deck = _cell(pair, a_guess, 3, alloy=True)
    deck += "fix relax all box/relax aniso 0.0 vmax 0.001\n" + _RELAX
    deck += 'print "ALLOY $(pe/atoms:%.17g) $(count(all)) $(press:%.17g)"\n'
    e_alloy, n, press = printed(run_lammps(exe, workdir, deck), "ALLOY")[0]
    assert n == 108 and abs(press) < 10.0, (n, press)
    return e_alloy - 0.5 * (e_cu + e_ni)


def nve(pair, a, temperature, picoseconds, timestep_fs, workdir, exe, every=50):
    """(times in ps, total energies per atom in eV, temperatures in K, fcc fraction after a quench)
    of the 50% alloy."""
    steps = int(round(picoseconds * 1000 / timestep_fs))
    deck = _cell(pair, a, 2, alloy=True) + f"""timestep {timestep_fs / 1000}
velocity all create {2 * temperature} 8675309 mom yes rot no dist gaussian
fix integrate all nve
thermo_style custom step time temp pe etotal
thermo_modify format float %.17g norm yes
thermo {every}
run {steps}
unfix integrate
{_RELAX}compute cna all cna/atom 3.05
variable fcc atom c_cna=={CNA_FCC}
compute nfcc all reduce sum v_fcc
thermo_style custom step pe c_nfcc
run 0
print "FCC $(c_nfcc/atoms:%.17g)"
"""
    out = run_lammps(exe, workdir, deck, timeout=3000)
    rows, header, in_block = [], None, False
    for line in out.splitlines():
        words = line.split()
        if words[:2] == ["Step", "Time"]:
            header, in_block = words, not rows
            continue
        if in_block:
            try:
                rows.append([float(w) for w in words])
            except ValueError:
                in_block = False
    rows = np.array(rows)
    assert len(rows) == steps // every + 1, len(rows)
    return rows[:, header.index("Time")], rows[:, header.index("TotEng")], rows[:, header.index("Temp")], \
        printed(out, "FCC")[0][0]
