#!/usr/bin/env python3
"""Build a MACE model with RANDOM weights (mace-torch) and export it to a flashmace file.

Random-weight models have real MACE architectures but predict nothing physical: they exist for
tests, examples of the machinery and benchmarks. No published weights are loaded: each foundation
preset rebuilds the architecture of a published MACE model from the hyperparameters of its training
script or, where none is published, from the closest published one ("inferred"). Presets:

  preset       hidden irreps        blocks       r_max Bessel A+Z  source: training script, or inferred
  tiny-cuni    8x0e+8x1o            Res/Res      4.5   6      no   test model: Cu, Ni; max_ell 2, correlation 2,
                                                                   radial MLP [16,16], MLP 8x0e
  tiny-cuni-agnesi  as tiny-cuni    Dens/DensRes 4.5   6      yes  test model: tiny-cuni with MP-0b3's options
  tiny-mh1     as tiny-cuni         NonLin/NonLin 4.5  6      yes  test model: tiny-cuni with MH-1's options (edge
                                                                   irreps 4x0e+4x1o, agnostic product, apply_cutoff
                                                                   false)
  tiny-89      as tiny-cuni         Res/Res      4.5   6      no   test model: tiny-cuni's shape with the 89
                                                                   elements of MACE-MP-0 (many-element tests)
  mp0-small    128x0e               Res/Res      6     10     no   MP-0a   mace_mp_0/2023-12-10-mace-128-L0_energy.sh
  mp0-medium   128x0e+128x1o        Res/Res      6     10     no   MP-0a   mace_mp_0/2023-12-03-mace-128-L1.sh
  mp0-large    128x0e+128x1o+128x2e Res/Res      6     10     no   MP-0a   mace_mp_0/2024-01-07-mace-128-L2.sh
  mp0b-small   128x0e               Plain/Res    6     8      yes  MP-0b   mace_mp_0b/mace-agnesi-small.sh
  mp0b-medium  128x0e+128x1o        Plain/Res    6     8      yes  MP-0b   mace_mp_0b/mace-agnesi-medium.sh
  mp0b2-small  128x0e               Dens/DensRes 5     8      yes  MP-0b2  mace_mp_0b2/mace-density-small.sh
  mp0b2-medium 128x0e+128x1o        Dens/DensRes 5     8      yes  MP-0b2  mace_mp_0b2/mace-density-medium.sh
  mp0b2-large  128x0e+128x1o+128x2e Dens/DensRes 5     8      yes  MP-0b2  mace_mp_0b2/mace-density-large.sh
  mp0b3-medium 128x0e+128x1o        Dens/DensRes 6     10     yes  MP-0b3  mace_mp_0b3/mace-mp0-b3.sh
  mpa0-medium  128x0e+128x1o        Dens/DensRes 6     10     yes  MPA-0   inferred from mp0b3-medium
  omat0-small  128x0e               Dens/DensRes 6     8      yes  OMAT-0  inferred from omat0-medium (max_L 0)
  omat0-medium 128x0e+128x1o        Dens/DensRes 6     8      yes  OMAT-0  mace_omat/mace-omat-medium.sh
  matpes-pbe   128x0e+128x1o        Dens/DensRes 6     8      yes  MATPES  inferred: a fine-tune of omat0-medium
  off23-small  96x0e                Plain/Res    5     8      no   OFF23   mace_off23/train_scripts/medium.sh; channels
  off23-medium 128x0e+128x1o        Plain/Res    5     8      no   OFF23     and L of each size from the MACE-OFF
  off23-large  192x0e+192x1o+192x2e Plain/Res    5     8      no   OFF23     paper (arXiv:2312.15211)
  off24-medium 128x0e+128x1o        Plain/Res    5     8      no   OFF24   inferred from off23-medium
  tiny-omol    as tiny-cuni         NonLin/NonLin 4.5  6      no   test model: tiny-mh1's options with OMOL-0's
                                                                   total charge and spin embeddings (8 wide)
  mh1          512x0e+512x1o        NonLin/NonLin 6    10     yes  MH-1    mace-foundations config-mace-mh-1.yaml:
                                                                   edge irreps 128x0e+128x1o (first layer: their
                                                                   scalars), agnostic product, apply_cutoff false
  omol0        512x(0e+1o+2e)       NonLin/NonLin 6    10     yes  OMOL-0  inferred: OMol25 paper's MACE (512 channels
                                                                   to l = 2), 3 layers of correlation 2 on edge
                                                                   irreps 128x(0e+1o+2e), total charge (-100..100)
                                                                   and spin (0..100) embeddings of 64 as mace-torch's
                                                                   --embedding_specs documents them, embedding
                                                                   readout; the rest as mh1. Elements H-Bi

  Scripts: mace_mp_0*/ in github.com/ACEsuit/mace-mp, mace_omat/ in ACEsuit/mace-foundations,
  mace_off23/ in ACEsuit/mace-off. Res: RealAgnosticResidualInteractionBlock; Plain:
  RealAgnosticInteractionBlock (mace-torch's `--model MACE` makes the first block this one unless a
  Density block is asked for); Dens/DensRes: RealAgnosticDensity[Residual]InteractionBlock; NonLin:
  RealAgnosticResidualNonLinearInteractionBlock. A+Z:
  distance_transform "Agnesi" and ZBL pair repulsion. Elements: the 89 of MACE-MP-0 (Z = 1-83, 89-94),
  OFF ones H C N O F P S Cl Br I. All but tiny-cuni: max_ell 3, correlation 3, 2 interactions,
  MLP_irreps 16x0e, radial MLP [64,64,64], 5th-order polynomial cutoff, silu gate. avg_num_neighbors
  is a round value of the order of the training data's (60 at r_max 6, 35 at r_max 5, 20 for OFF), not
  the trained model's. Weights are drawn from N(0, 1), some layers of Density and NonLin blocks then
  rescaled (build() says why).

--elements Z1,Z2,... (symbols or atomic numbers): only these of the preset's elements, for small test
models. --heads A,B,...: a multi-head model (mace-torch's heads: a readout output, E0s, scale and shift
per head, the rest shared), as a multi-head fine-tune of a foundation model has (e.g. pt_head,Default).

Usage: make_random_model.py PRESET OUT.safetensors [--dtype float32|float64] [--seed N] [--heads A,B]
                            [--elements A,B] [--torch-model OUT.model]
--torch-model also saves the mace-torch model itself (torch.save, float64), for runners that load
mace-torch models: bench/fastmace_structures.py hands it to FastMACE, so both run the same weights.
"""
import argparse
import os
import sys

import numpy as np

# MACE-MP-0's element set: Z = 1..83 and 89..94 (mace_spec.md 2.3).
MP0_ELEMENTS = list(range(1, 84)) + list(range(89, 95))
# MACE-OFF's element set: H C N O F P S Cl Br I.
OFF_ELEMENTS = [1, 6, 7, 8, 9, 15, 16, 17, 35, 53]

RESIDUAL = ("RealAgnosticResidualInteractionBlock", "RealAgnosticResidualInteractionBlock")
PLAIN_FIRST = ("RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock")
DENSITY = ("RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock")
NONLINEAR = ("RealAgnosticResidualNonLinearInteractionBlock", "RealAgnosticResidualNonLinearInteractionBlock")
L0, L1, L2 = "128x0e", "128x0e+128x1o", "128x0e+128x1o+128x2e"
# MACE-OMOL's element set: H to Bi (Z = 1-83).
OMOL_ELEMENTS = list(range(1, 84))


def OMOL_EMBEDDINGS(dim):
    """Total charge -100..100 and total spin 0..100 as mace-torch's --embedding_specs documents them."""
    return {"total_charge": {"type": "categorical", "per": "graph", "in_dim": 1, "emb_dim": dim, "num_classes": 201,
                             "offset": 100},
            "total_spin": {"type": "categorical", "per": "graph", "in_dim": 1, "emb_dim": dim, "num_classes": 101,
                           "offset": 0}}


def foundation(hidden, blocks, r_max, num_bessel, agnesi_zbl, elements=MP0_ELEMENTS, avg_num_neighbors=None):
    """A foundation-model preset: what every published MACE foundation model shares, and what varies."""
    return dict(hidden=hidden, max_ell=3, correlation=3, elements=elements, r_max=r_max, radial_mlp=[64, 64, 64],
                num_bessel=num_bessel, mlp_irreps="16x0e",
                avg_num_neighbors=avg_num_neighbors or {6.0: 60.0, 5.0: 35.0}[r_max], blocks=blocks,
                distance_transform="Agnesi" if agnesi_zbl else "None", pair_repulsion=agnesi_zbl)


PRESETS = {
    "tiny-cuni": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=[28, 29], r_max=4.5,
                      radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0),
    # tiny-cuni with MACE-MP-0b3's options (Density blocks, Agnesi transform, ZBL): the fused edge
    # geometry's transform path in the engine and GPU tests.
    "tiny-cuni-agnesi": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=[28, 29], r_max=4.5,
                             radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0,
                             blocks=DENSITY, distance_transform="Agnesi", pair_repulsion=True),
    # tiny-cuni's shape with MACE-MH-1's options (NonLinear blocks on narrower edge irreps, agnostic
    # product, envelope inside the interactions, Agnesi transform, ZBL): the engine's NonLinear path.
    "tiny-mh1": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=[28, 29], r_max=4.5,
                     radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0,
                     blocks=NONLINEAR, distance_transform="Agnesi", pair_repulsion=True, edge_irreps="4x0e+4x1o",
                     use_edge_irreps_first=True, use_agnostic_product=True, apply_cutoff=False),
    # tiny-mh1 with MACE-OMOL's per-structure inputs (total charge and spin embeddings, embedding
    # readout): the pair_style keywords charge and spin.
    "tiny-omol": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=[28, 29], r_max=4.5,
                      radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0,
                      blocks=NONLINEAR, edge_irreps="4x0e+4x1o", use_edge_irreps_first=True,
                      use_agnostic_product=True, apply_cutoff=False, embedding_specs=OMOL_EMBEDDINGS(8),
                      use_embedding_readout=True),
    # tiny-cuni's shape with every element of the foundation models: many elements present at once.
    "tiny-89": dict(hidden="8x0e+8x1o", max_ell=2, correlation=2, elements=MP0_ELEMENTS, r_max=4.5,
                    radial_mlp=[16, 16], num_bessel=6, mlp_irreps="8x0e", avg_num_neighbors=12.0),
    "mp0-small": foundation(L0, RESIDUAL, 6.0, 10, False),
    "mp0-medium": foundation(L1, RESIDUAL, 6.0, 10, False),
    "mp0-large": foundation(L2, RESIDUAL, 6.0, 10, False),
    "mp0b-small": foundation(L0, PLAIN_FIRST, 6.0, 8, True),
    "mp0b-medium": foundation(L1, PLAIN_FIRST, 6.0, 8, True),
    "mp0b2-small": foundation(L0, DENSITY, 5.0, 8, True),
    "mp0b2-medium": foundation(L1, DENSITY, 5.0, 8, True),
    "mp0b2-large": foundation(L2, DENSITY, 5.0, 8, True),
    "mp0b3-medium": foundation(L1, DENSITY, 6.0, 10, True),
    "mpa0-medium": foundation(L1, DENSITY, 6.0, 10, True),
    "omat0-small": foundation(L0, DENSITY, 6.0, 8, True),
    "omat0-medium": foundation(L1, DENSITY, 6.0, 8, True),
    "matpes-pbe": foundation(L1, DENSITY, 6.0, 8, True),
    "off23-small": foundation("96x0e", PLAIN_FIRST, 5.0, 8, False, OFF_ELEMENTS, 20.0),
    "off23-medium": foundation(L1, PLAIN_FIRST, 5.0, 8, False, OFF_ELEMENTS, 20.0),
    "off23-large": foundation("192x0e+192x1o+192x2e", PLAIN_FIRST, 5.0, 8, False, OFF_ELEMENTS, 20.0),
    "off24-medium": foundation(L1, PLAIN_FIRST, 5.0, 8, False, OFF_ELEMENTS, 20.0),
    # MACE-MH-1: the non-linear blocks on 128-channel edge irreps (their scalars in the first layer),
    # one symmetric-contraction weight set for all elements, the envelope inside the interactions.
    "mh1": dict(foundation("512x0e+512x1o", NONLINEAR, 6.0, 10, True), edge_irreps="128x0e+128x1o",
                use_edge_irreps_first=True, use_agnostic_product=True, apply_cutoff=False),
    # MACE-OMOL-0: NonLinear blocks with total charge and spin embeddings, 3 interactions of correlation 2
    # on edge irreps up to l = 2 (hidden irreps from the OMol25 paper's MACE, 512 channels up to l = 2;
    # the rest inferred from MH-1).
    "omol0": dict(foundation("512x0e+512x1o+512x2e", NONLINEAR, 6.0, 10, True, OMOL_ELEMENTS),
                  correlation=2, num_interactions=3, edge_irreps="128x0e+128x1o+128x2e", use_edge_irreps_first=True,
                  use_agnostic_product=True, apply_cutoff=False, embedding_specs=OMOL_EMBEDDINGS(64),
                  use_embedding_readout=True),
}


def parse_elements(text):
    """'H,O' or '1,8' (or a mix) -> sorted atomic numbers."""
    from ase.data import atomic_numbers

    zs = []
    for item in text.split(","):
        item = item.strip()
        if item.isdigit():
            zs.append(int(item))
        elif item in atomic_numbers:
            zs.append(atomic_numbers[item])
        else:
            raise ValueError(f"--elements: '{item}' is neither an element symbol nor an atomic number")
    return sorted(set(zs))


def build(preset, seed, heads=None, elements=None):
    """The preset's mace-torch ScaleShiftMACE (float64) with random weights; elements (atomic numbers), if
    given, restricts the preset's element set to those."""
    # e3nn 0.4.4 (pinned by MACE) reads its constant tables with torch.load, which torch >= 2.6
    # refuses by default; the file ships inside the e3nn package.
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from e3nn import o3
    from mace.modules import ScaleShiftMACE, interaction_classes

    p = PRESETS[preset]
    zs = p["elements"]
    if elements is not None:
        outside = sorted(set(elements) - set(zs))
        if outside:
            raise ValueError(f"preset {preset} has no element Z = {outside}; its elements are Z = {zs}")
        zs = sorted(set(elements))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    torch.set_default_dtype(torch.float64)
    first, later = (interaction_classes[name] for name in p.get("blocks", RESIDUAL))
    n_heads = len(heads) if heads else 1
    e0 = -rng.uniform(1.0, 5.0, (n_heads, len(zs)))
    per_head = {} if not heads else dict(heads=list(heads), atomic_inter_scale=list(rng.uniform(0.5, 2.0, n_heads)),
                                         atomic_inter_shift=list(rng.uniform(-0.5, 0.5, n_heads)))
    model = ScaleShiftMACE(
        r_max=p["r_max"], num_bessel=p["num_bessel"], num_polynomial_cutoff=5, max_ell=p["max_ell"],
        interaction_cls=later, interaction_cls_first=first, num_interactions=p.get("num_interactions", 2),
        num_elements=len(zs), hidden_irreps=o3.Irreps(p["hidden"]), MLP_irreps=o3.Irreps(p["mlp_irreps"]),
        atomic_energies=e0 if heads else e0[0], avg_num_neighbors=p["avg_num_neighbors"],
        atomic_numbers=zs, correlation=p["correlation"], gate=torch.nn.functional.silu,
        radial_MLP=p["radial_mlp"], distance_transform=p.get("distance_transform", "None"),
        pair_repulsion=p.get("pair_repulsion", False), apply_cutoff=p.get("apply_cutoff", True),
        edge_irreps=o3.Irreps(p["edge_irreps"]) if "edge_irreps" in p else None,
        use_edge_irreps_first=p.get("use_edge_irreps_first", False),
        use_agnostic_product=p.get("use_agnostic_product", False),
        embedding_specs=p.get("embedding_specs"), use_embedding_readout=p.get("use_embedding_readout", False),
        **(per_head or dict(atomic_inter_scale=1.0, atomic_inter_shift=0.0)))
    # MACE initialises some weights to zero (e.g. higher-order SC weights); redraw every float
    # parameter so that every path of the architecture contributes.
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 1.0)
        for block in model.interactions:
            if hasattr(block, "alpha"):
                # Non-linear blocks divide by alpha + beta * density (MACE starts at 20 and 0): keep it
                # away from 0 with density >= 0 (beta not 1, so that a lost factor beta shows);
                # torch.nn.Linear, unlike e3nn's layers, does not divide by its fan-in, so N(0, 1/fan_in)
                # weights keep the MLPs' outputs O(1).
                block.alpha.fill_(3.0)
                block.beta.fill_(0.7)
                for mlp in (block.conv_tp_weights, block.density_fn):
                    for layer in mlp.net:
                        if isinstance(layer, torch.nn.Linear):
                            layer.weight.mul_(layer.in_features ** -0.5)
            elif hasattr(block, "density_fn"):
                # Density blocks divide the message sum by 1 + sum over edges of tanh(density_fn(r)^2),
                # not by avg_num_neighbors. With N(0, 1) weights density_fn gives ~1 % per edge, the sum
                # goes unnormalised and two correlation-3 products raise it to about the 9th power
                # (1e8 eV on 8 atoms). x5 makes the density O(1) per edge (the message about a mean
                # over neighbours, as trained models have it); x0.3 on the radial MLP's output brings
                # that mean to the message scale of the other blocks (0.1-1), so that energies stay
                # within tens of eV and interaction forces within a few eV/A on 8-atom structures.
                block.density_fn[0].weight.mul_(5.0)
                block.conv_tp_weights[-1].weight.mul_(0.3)
        if hasattr(model, "joint_embedding"):
            # the per-structure embedding is added to the node features: keep it their size
            model.joint_embedding.project[0].weight.mul_(0.3)
        if len(model.interactions) > 2:
            # each correlation-c product raises the features to the c-th power: with a third layer,
            # N(0, 1) product weights give energies of 1e7 eV at 512 channels, x0.03 ones tens of eV
            for product in model.products:
                for name, param in product.named_parameters():
                    if "symmetric_contractions" in name:
                        param.mul_(0.03)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("output")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heads", help="comma-separated head names: a multi-head model")
    parser.add_argument("--elements", help="comma-separated element symbols or atomic numbers: only these of the "
                                           "preset's elements")
    parser.add_argument("--torch-model", help="also save the mace-torch model itself here (torch.save, float64), "
                                              "for runners that load mace-torch models (FastMACE)")
    args = parser.parse_args(argv)
    import export_mace

    heads = args.heads.split(",") if args.heads else None
    try:
        elements = parse_elements(args.elements) if args.elements else None
        model = build(args.preset, args.seed, heads, elements)
    except ValueError as error:
        parser.error(str(error))
    options = f" --elements {','.join(map(str, elements))}" if elements else ""
    meta = export_mace.export_model(model, args.output, dtype=args.dtype, source=f"make_random_model.py {args.preset} "
                                    f"--seed {args.seed}{options} (RANDOM WEIGHTS)")
    if args.torch_model:
        import torch
        torch.save(model, args.torch_model)
    print(f"wrote {args.output}: random-weight {args.preset}, {meta['hidden_irreps']}, {len(meta['atomic_numbers'])} "
          f"elements, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
