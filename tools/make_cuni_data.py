#!/usr/bin/env python3
"""Generate the Cu-Ni training data with LAMMPS and the EAM potential Debian ships.

fcc Cu, Ni and random alloys: NVT snapshots 300-1500 K, a cold energy-volume scan, strained and
sheared cells, vacancies, (100)/(110)/(111) slabs with vacuum, and liquids; energies, forces and
stresses (eV/A^3, ASE's sign) under REF_energy / REF_forces / REF_stress in extended XYZ, split
by trajectory into train/valid/test. The same seed gives the same files, byte for byte.

Usage: make_cuni_data.py OUT_DIR [--plan full|smoke] [--seed N] [--jobs N] [--lmp lmp] [--eam FILE]
Needs only numpy and a LAMMPS executable with pair_style eam/alloy (Debian: lammps, lammps-data).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuni.dataset import generate  # noqa: E402

DEFAULT_EAM = "/usr/share/lammps/potentials/CuNi.eam.alloy"  # Debian's lammps-data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--plan", choices=["full", "smoke"], default="full")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--jobs", type=int, default=1, help="LAMMPS processes side by side (same result for any)")
    parser.add_argument("--lmp", default=os.environ.get("FLASHMACE_EAM_LMP", "lmp"))
    parser.add_argument("--eam", default=DEFAULT_EAM)
    parser.add_argument("--keep-work", action="store_true", help="keep the LAMMPS decks and dumps")
    args = parser.parse_args(argv)
    start = time.time()
    try:
        manifest = generate(args.out_dir, args.plan, args.seed, args.eam, args.lmp, args.jobs, args.keep_work)
    except (FileNotFoundError, RuntimeError) as err:
        print(f"make_cuni_data.py: ERROR: {err}", file=sys.stderr)
        return 1
    print(json.dumps(manifest["splits"]))
    print(f"make_cuni_data.py: wrote {args.out_dir} in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
