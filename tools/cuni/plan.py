"""What the Cu-Ni data set samples: the list of trajectories for the full set and for the smoke
set. Each trajectory draws its structure, strain, occupation and LAMMPS seeds from its own
generator, seeded by (seed, kind, index), so adding a kind leaves the others' configurations as
they were."""
import zlib

import numpy as np

from . import structures as st
from .lammps_eam import Trajectory

# Nominal fcc lattice constants of the EAM file's elements (its header lines): the centre of the
# sampled volumes, not the potential's exact minima (the cold E-V scan brackets those).
A_CU, A_NI = 3.615, 3.52
# Linear thermal expansion used to pick NVT volumes near zero pressure at temperature T (about
# Cu's 1.7e-5 /K); the residual pressure is part of the label, so this only centres the sampling.
EXPANSION_PER_K = 1.7e-5
COMPOSITIONS = (0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0)  # Ni fraction; pure Cu and Ni included
VACUUM = 10.0  # A: twice past the EAM cutoff (6.39 A), so the two surfaces of a slab do not interact
MELT_TEMPERATURE = 3500.0  # K: far above both melting points, melts a 108-atom cell within picoseconds


def _rng(seed, kind, index):
    return np.random.default_rng([seed, zlib.crc32(kind.encode()), index])


def _lammps_seed(rng):
    # LAMMPS's Marsaglia generator takes seeds up to 900,000,000; a trajectory uses seed, seed + 1,
    # ..., seed + 3 + frames.
    return int(rng.integers(1, 899_000_000))


def _lattice(x_ni, temperature, rng, jitter=0.01):
    a = st.vegard_lattice(x_ni, A_CU, A_NI) * (1.0 + EXPANSION_PER_K * temperature)
    return a * (1.0 + rng.uniform(-jitter, jitter))


class _Planner:
    def __init__(self, seed, md):
        self.seed, self.md, self.trajectories = seed, md, []

    def add(self, kind, make, temperature, frames, melt=0.0, **info):
        """make(rng) -> Structure; md = (equilibrate_steps, interval) for temperature > 0."""
        index = sum(t.kind == kind for t in self.trajectories)
        rng = _rng(self.seed, kind, index)
        structure = make(rng)
        equilibrate, interval = self.md if temperature > 0 else (0, 0)
        name = f"{kind}_{index:04d}"
        info = dict(info, temperature=float(temperature), trajectory=name)
        self.trajectories.append(Trajectory(name, kind, structure, float(temperature), frames, interval,
                                            equilibrate, _lammps_seed(rng), melt, info))


def _bulk(x, temperature, reps):
    return lambda rng: st.random_alloy(st.fcc_cubic(_lattice(x, temperature, rng), reps), x, rng)


def _cold_volume(x, scale, sigma, reps):
    def make(rng):
        a = st.vegard_lattice(x, A_CU, A_NI) * (1.0 + scale)
        return st.rattled(st.random_alloy(st.fcc_cubic(a, reps), x, rng), sigma, rng)
    return make


def _sheared(x, temperature, reps, normal, shear, sigma=0.0):
    def make(rng):
        s = _bulk(x, temperature, reps)(rng)
        s = st.strained(s, st.random_strain(rng, normal, shear))
        return st.rattled(s, sigma, rng) if sigma else s
    return make


def _vacancy(x, temperature, reps, count):
    return lambda rng: st.with_vacancies(_bulk(x, temperature, reps)(rng), count, rng)


def _surface(x, temperature, orientation, reps):
    def make(rng):
        crystal = st.fcc_oriented(_lattice(x, temperature, rng, jitter=0.0), orientation, reps)
        return st.slab(st.random_alloy(crystal, x, rng), VACUUM)
    return make


def _liquid(x, reps, lattice_scale):
    # Liquid Cu and Ni are ~10% less dense than the solid at melting: scale the lattice by ~3%.
    return lambda rng: st.random_alloy(st.fcc_cubic(st.vegard_lattice(x, A_CU, A_NI) * lattice_scale, reps), x, rng)


def full_plan(seed):
    """About 2,700 configurations of 31-108 atoms."""
    p = _Planner(seed, md=(2000, 200))  # 2 ps to equilibrate, then a frame every 0.2 ps
    for x in COMPOSITIONS:
        for temperature in (300, 600, 900, 1200, 1500):
            for reps in ((2, 2, 2), (3, 3, 3)):
                p.add("bulk_nvt", _bulk(x, temperature, reps), temperature, 12, x_Ni=x)
    # Cold energy-volume scan: the lattice constants and the bulk modulus live here.
    for x in COMPOSITIONS:
        for scale in np.linspace(-0.05, 0.05, 11):
            sigmas = (0.0, 0.01, 0.04) if x in (0.0, 1.0) else (0.01, 0.04)
            for sigma in sigmas:
                p.add("bulk_cold", _cold_volume(x, scale, sigma, (2, 2, 2)), 0, 1, x_Ni=x)
    rng = _rng(seed, "choices", 0)
    for _ in range(60):
        x, temperature = rng.choice(COMPOSITIONS), rng.choice((300, 600, 900, 1200))
        reps = ((2, 2, 2), (2, 2, 3), (3, 3, 3))[rng.integers(3)]
        p.add("strained_nvt", _sheared(x, temperature, reps, 0.04, 0.05), temperature, 8, x_Ni=x)
    for _ in range(100):
        x, sigma = rng.choice(COMPOSITIONS), rng.uniform(0.02, 0.06)
        p.add("strained_cold", _sheared(x, 0, (2, 2, 2), 0.05, 0.06, sigma), 0, 1, x_Ni=x)
    for x in (0.0, 0.25, 0.5, 0.75, 1.0):
        for temperature in (100, 500, 900, 1300):
            p.add("vacancy", _vacancy(x, temperature, (2, 2, 2), 1), temperature, 8, x_Ni=x)
            p.add("vacancy", _vacancy(x, temperature, (3, 3, 3), 1 + (temperature >= 900)), temperature, 8, x_Ni=x)
    for orientation, reps in (("100", (3, 3, 3)), ("110", (2, 3, 6)), ("111", (3, 2, 3))):
        for x in (0.0, 0.5, 1.0):
            for temperature in (100, 500, 900, 1300):
                p.add("surface", _surface(x, temperature, orientation, reps), temperature, 8, x_Ni=x)
    for x in (0.0, 0.25, 0.5, 0.75, 1.0):
        for temperature in (1700, 2000, 2400):
            p.add("liquid", _liquid(x, (3, 3, 3), 1.03), temperature, 12, melt=MELT_TEMPERATURE, x_Ni=x)
    return p.trajectories


def smoke_plan(seed):
    """16 configurations of 31-32 atoms, one to three of each kind: a second of LAMMPS, for tests."""
    p = _Planner(seed, md=(100, 20))
    for x, temperature in ((0.0, 600), (0.5, 900), (1.0, 1200)):
        p.add("bulk_nvt", _bulk(x, temperature, (2, 2, 2)), temperature, 2, x_Ni=x)
    for x, scale in ((0.0, -0.03), (1.0, 0.02), (0.5, 0.0)):
        p.add("bulk_cold", _cold_volume(x, scale, 0.03, (2, 2, 2)), 0, 1, x_Ni=x)
    p.add("strained_nvt", _sheared(0.25, 600, (2, 2, 2), 0.04, 0.05), 600, 2, x_Ni=0.25)
    p.add("strained_cold", _sheared(0.75, 0, (2, 2, 2), 0.05, 0.06, 0.03), 0, 1, x_Ni=0.75)
    p.add("vacancy", _vacancy(0.5, 500, (2, 2, 2), 1), 500, 2, x_Ni=0.5)
    p.add("surface", _surface(0.5, 500, "100", (2, 2, 2)), 500, 1, x_Ni=0.5)
    p.add("liquid", _liquid(0.5, (2, 2, 2), 1.03), 2000, 1, melt=MELT_TEMPERATURE, x_Ni=0.5)
    return p.trajectories


PLANS = {"full": full_plan, "smoke": smoke_plan}
