"""Long run: 100,000 MD steps through pair_style mace/flash with the process's resident memory
(VmRSS) sampled every 1,000 steps; after a warm-up of 10,000 steps it must not grow by more than
MAX_GROWTH. A leak of a few bytes per step or per re-neighbouring (buffers regrown, tensors kept,
neighbour data appended) shows up over 90,000 steps: MAX_GROWTH / 90,000 steps is 23 bytes a step.

System (chosen for the step count, docs/reliability.md): one fcc Cu-Ni cell (4 atoms, 2 Cu and 2 Ni,
a 3.6 A periodic box: every atom meets its own images within the cutoff) with the tiny random test
model (potentials/testing: 8x0e+8x1o, 2 layers, r_max 4.5), NVT at 600 K: about 2 ms a step on one
core, so 100,000 steps take about 3.5 minutes (the example, 108 atoms with the Cu-Ni model, takes
~60 ms a step: 100 minutes; the Cu-Ni model on these 4 atoms 5 ms). Each step runs the same code
whatever the size: the neighbour list with ~470 ghost atoms, forces, virial, per-atom energies.
A random model has no repulsive core (left alone, two of these atoms met within 30,000 steps), so
each atom is tethered to its lattice site by fix spring/self (1 eV/A^2: ~0.2 A rms at 600 K), and
the skin is 0.3 A so that LAMMPS re-neighbours every ~30 steps (about 3,400 times in the run), which
the test checks from LAMMPS's own count (MIN_NEIGHBOR_BUILDS): a run that stopped re-neighbouring
would otherwise pass, having exercised only the first neighbour list.

Negative control: the same sampler and check on a run that does leak, by a known amount, through
LAMMPS itself: fix vector stores 256 doubles (2 KiB) every step into an array it allocated for the
whole run, whose pages become resident as they are written; 5,000 steps after a 2,000-step warm-up
(9.8 MiB) must fail the check, and the growth measured must be that leak."""
import subprocess

from lammps_harness import LMP, TINY, lammps_env

STEPS = 100_000
WARMUP = 10_000
SAMPLE_EVERY = 1_000
MAX_GROWTH = 2 * 2**20  # bytes of VmRSS after the warm-up
LEAK_DOUBLES = 256  # the negative control's leak per step (2 KiB)
# LAMMPS rebuilds the list once an atom has moved half the skin (0.15 A) since the last build (the
# defaults of Debian's LAMMPS: neigh_modify every 1 delay 10 check yes, so at most 10,000 builds). At
# 600 K a Cu atom's thermal speed is ~4.9 A/ps (sqrt(3 kT/m)), so one of the 4 atoms covers 0.15 A in
# ~30 fs = 30 steps; the tether cannot stop that (its period is ~0.5 ps, and an atom half a period on
# sits mirrored through its site, ~0.8 A away), it only bounds excursions. Measured: 340 builds in the
# first 10,000 steps (one per 29 steps). The bound is a third of that rate: re-neighbouring that
# stopped (1 build, at setup) or became rare (a skin read too large, a delay of hundreds of steps) fails it.
MIN_NEIGHBOR_BUILDS = 1_000

DECK = f"""units metal
atom_style atomic
atom_modify map array
newton on
lattice fcc 3.6
region box block 0 1 0 1 0 1
create_box 2 box
create_atoms 1 box
set type 1 type/fraction 2 0.5 4928
mass 1 63.546
mass 2 58.6934
pair_style mace/flash
pair_coeff * * {TINY} Cu Ni
neighbor 0.3 bin
timestep 0.001
velocity all create 600.0 4928459 mom yes rot yes dist gaussian loop geom
fix nvt all nvt temp 600.0 600.0 0.1
fix tether all spring/self 1.0
compute pe_atom all pe/atom
compute pe_sum all reduce sum c_pe_atom
thermo_style custom step temp pe c_pe_sum etotal press
thermo_modify flush yes
thermo {SAMPLE_EVERY}
"""


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def rss_by_step(tmp_path, deck, steps):
    """Runs deck + `run steps` with flashmace-lmp; returns {step: VmRSS in bytes}, each read the moment
    that step's thermo line arrives (LAMMPS flushes it, then computes on), and the run's neighbour-list
    builds (LAMMPS's end-of-run "Neighbor list builds = N")."""
    (tmp_path / "in.deck").write_text(deck + f"run {steps}\n")
    proc = subprocess.Popen([LMP, "-in", "in.deck", "-log", "none", "-echo", "none"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=lammps_env())
    rss, tail, builds = {}, [], None
    for line in proc.stdout:
        tail = (tail + [line])[-40:]
        words = line.split()
        if len(words) == 6 and words[0].isdigit():
            rss[int(words[0])] = vm_rss(proc.pid)
        if line.startswith("Neighbor list builds ="):
            builds = int(words[-1])
    assert proc.wait() == 0 and not any("ERROR" in line for line in tail), "".join(tail)
    assert sorted(rss) == list(range(0, steps + 1, SAMPLE_EVERY)), sorted(rss)[-3:]
    assert builds is not None, "no 'Neighbor list builds = N' line in LAMMPS's output:\n" + "".join(tail)
    return rss, builds


def growth_after_warmup(rss, warmup=WARMUP):
    settled = rss[warmup]
    after = [v for step, v in rss.items() if step >= warmup]
    print(f"VmRSS at step {warmup}: {settled / 2**20:.1f} MiB; after it {(min(after) - settled) / 2**10:+.0f} to "
          f"{(max(after) - settled) / 2**10:+.0f} KiB; at step {max(rss)} {(rss[max(rss)] - settled) / 2**10:+.0f} KiB")
    return max(after) - settled


def test_100k_steps_without_memory_growth(tmp_path):
    rss, builds = rss_by_step(tmp_path, DECK, STEPS)
    growth = growth_after_warmup(rss)
    assert growth <= MAX_GROWTH, f"VmRSS grew by {growth / 2**20:.2f} MiB after the warm-up"
    # The claim is about memory across re-neighbourings: they must have happened, as often as the deck implies.
    assert builds >= MIN_NEIGHBOR_BUILDS, (f"{builds} neighbour-list builds in {STEPS} steps, fewer than "
                                           f"{MIN_NEIGHBOR_BUILDS}: LAMMPS did not re-neighbour as the deck implies")


def test_a_known_leak_fails_the_growth_check(tmp_path):
    leak = "variable one equal 1.0\nfix leak all vector 1 " + " ".join(["v_one"] * LEAK_DOUBLES) + "\n"
    growth = growth_after_warmup(rss_by_step(tmp_path, DECK + leak, 7_000)[0], warmup=2_000)
    leaked = 5_000 * LEAK_DOUBLES * 8
    assert growth > MAX_GROWTH, f"the check passed a run that leaked {leaked / 2**20:.1f} MiB"
    # The sampler sees the leak at its size (pages of 4 KiB: within a page per 1,000-step sample).
    assert abs(growth - leaked) < 0.1 * leaked, f"grew by {growth / 2**20:.2f} MiB, leaked {leaked / 2**20:.2f} MiB"
