#!/usr/bin/env python3
"""Build a MACE model with RANDOM weights (mace-torch) and export it to a flashmace file.

Random-weight models have real MACE architectures but predict nothing physical: they exist for
tests, examples of the machinery and benchmarks. Presets:
  tiny-cuni   8x0e+8x1o, max_ell 2, correlation 2, 2 layers, Cu/Ni, r_max 4.5 (small file, repo test model)
  mp0-small   shaped like MACE-MP-0 small:  128x0e
  mp0-medium  shaped like MACE-MP-0 medium: 128x0e+128x1o
  mp0-large   shaped like MACE-MP-0 large:  128x0e+128x1o+128x2e
(mp0-*: max_ell 3, correlation 3, 2 residual layers, r_max 6, 89 elements, radial MLP [64,64,64],
10 Bessel functions.)

--heads A,B,...: a multi-head model (mace-torch's heads: a readout output, E0s, scale and shift
per head, the rest shared), as a multi-head fine-tune of a foundation model has (e.g. pt_head,Default).

Usage: make_random_model.py PRESET OUT.safetensors [--dtype float32|float64] [--seed N] [--heads A,B]
"""
import argparse
import os
import sys

import numpy as np

# MACE-MP-0's element set: Z = 1..83 and 89..94 (mace_spec.md 2.3).
MP0_ELEMENTS = list(range(1, 84)) + list(range(89, 95))

PRESETS = {
    "tiny-cuni": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=[28, 29], r_max=4.5,
                      radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0),
    "mp0-small": dict(hidden="128x0e", max_ell=3, correlation=3, elements=MP0_ELEMENTS, r_max=6.0,
                      radial_mlp=[64, 64, 64], num_bessel=10, mlp_irreps="16x0e", avg_num_neighbors=60.0),
    "mp0-medium": dict(hidden="128x0e+128x1o", max_ell=3, correlation=3, elements=MP0_ELEMENTS, r_max=6.0,
                       radial_mlp=[64, 64, 64], num_bessel=10, mlp_irreps="16x0e", avg_num_neighbors=60.0),
    "mp0-large": dict(hidden="128x0e+128x1o+128x2e", max_ell=3, correlation=3, elements=MP0_ELEMENTS, r_max=6.0,
                      radial_mlp=[64, 64, 64], num_bessel=10, mlp_irreps="16x0e", avg_num_neighbors=60.0),
}


def build(preset, seed, heads=None):
    # e3nn 0.4.4 (pinned by MACE) reads its constant tables with torch.load, which torch >= 2.6
    # refuses by default; the file ships inside the e3nn package.
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from e3nn import o3
    from mace.modules import ScaleShiftMACE, interaction_classes

    p = PRESETS[preset]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    torch.set_default_dtype(torch.float64)
    block = interaction_classes["RealAgnosticResidualInteractionBlock"]
    n_heads = len(heads) if heads else 1
    e0 = -rng.uniform(1.0, 5.0, (n_heads, len(p["elements"])))
    per_head = {} if not heads else dict(heads=list(heads), atomic_inter_scale=list(rng.uniform(0.5, 2.0, n_heads)),
                                         atomic_inter_shift=list(rng.uniform(-0.5, 0.5, n_heads)))
    model = ScaleShiftMACE(
        r_max=p["r_max"], num_bessel=p["num_bessel"], num_polynomial_cutoff=5, max_ell=p["max_ell"],
        interaction_cls=block, interaction_cls_first=block, num_interactions=2,
        num_elements=len(p["elements"]), hidden_irreps=o3.Irreps(p["hidden"]), MLP_irreps=o3.Irreps(p["mlp_irreps"]),
        atomic_energies=e0 if heads else e0[0], avg_num_neighbors=p["avg_num_neighbors"],
        atomic_numbers=p["elements"], correlation=p["correlation"], gate=torch.nn.functional.silu,
        radial_MLP=p["radial_mlp"], **(per_head or dict(atomic_inter_scale=1.0, atomic_inter_shift=0.0)))
    # MACE initialises some weights to zero (e.g. higher-order SC weights); redraw every float
    # parameter so that every path of the architecture contributes.
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 1.0)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("output")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heads", help="comma-separated head names: a multi-head model")
    args = parser.parse_args(argv)
    import export_mace

    heads = args.heads.split(",") if args.heads else None
    model = build(args.preset, args.seed, heads)
    meta = export_mace.export_model(model, args.output, dtype=args.dtype,
                                    source=f"make_random_model.py {args.preset} --seed {args.seed} (RANDOM WEIGHTS)")
    print(f"wrote {args.output}: random-weight {args.preset}, {meta['hidden_irreps']}, {len(meta['atomic_numbers'])} "
          f"elements, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
