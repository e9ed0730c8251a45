#!/usr/bin/env python3
"""The bundled Cu-Ni potential, end to end: EAM training data (make_cuni_data.py), training with
mace-torch's official trainer, export to a flashmace model file, and its held-out test errors.

  train_cuni.py OUT_DIR [--device cpu|cuda] [--dtype float64|float32] [--data DIR]
                [--output potentials/CuNi-flashmace.safetensors] [--preset full|smoke] [--seed N]

OUT_DIR receives data/ (unless --data names existing data), train/ (the trainer's folder: logs,
checkpoints, CuNi.model) and test_errors.json; the exported model goes to --output. `--preset
smoke` is the test-sized run: 16 configurations and a toy model trained for 30 steps.
Everything is seeded: the same command gives the same data, and on the same device and
software the same model.
"""
import argparse
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from cuni import dataset, evaluate, training  # noqa: E402
from make_cuni_data import DEFAULT_EAM  # noqa: E402

DEFAULT_OUTPUT = os.path.join(here, "..", "potentials", "CuNi-flashmace.safetensors")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--preset", choices=sorted(training.PRESETS), default="full")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="training precision")
    parser.add_argument("--seed", type=int, default=2024, help="data and training seed")
    parser.add_argument("--epochs", type=int, help="override the preset's epoch count")
    parser.add_argument("--data", help="existing data folder (train/valid/test.xyz) instead of generating it")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="LAMMPS processes for the data")
    parser.add_argument("--lmp", default=os.environ.get("FLASHMACE_EAM_LMP", "lmp"))
    parser.add_argument("--eam", default=DEFAULT_EAM)
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="flashmace model file to write")
    args = parser.parse_args(argv)
    out_dir = os.path.abspath(args.out_dir)
    start = time.time()

    def stamp(what):
        print(f"train_cuni: [{time.time() - start:7.1f} s] {what}", flush=True)

    data_dir = args.data or os.path.join(out_dir, "data")
    if not args.data:
        stamp(f"generating the {args.preset} data set with {args.lmp} into {data_dir}")
        manifest = dataset.generate(data_dir, "smoke" if args.preset == "smoke" else "full", args.seed, args.eam,
                                    args.lmp, args.jobs)
        stamp(f"data: {json.dumps(manifest['splits'])}")

    work_dir = os.path.join(out_dir, "train")
    stamp(f"training ({args.preset}, {args.device}, {args.dtype}) in {work_dir}")
    model = training.train(args.preset, data_dir, work_dir, args.device, args.dtype, args.seed, args.epochs)
    stamp(f"trained: {model}")

    from export_mace import export_model
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    meta = export_model(model, args.output)
    stamp(f"exported {args.output} ({meta['hidden_irreps']}, {meta['num_interactions']} layers, {meta['dtype']})")

    table = evaluate.evaluate(model, os.path.join(data_dir, "test.xyz"), args.device, args.dtype)
    with open(os.path.join(out_dir, "test_errors.json"), "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(evaluate.format_table(table))
    stamp(f"test set: energy RMSE {table['all']['energy_rmse_meV_per_atom']:.2f} meV/atom, "
          f"force RMSE {table['all']['force_rmse_meV_per_A']:.1f} meV/A")
    return 0


if __name__ == "__main__":
    sys.exit(main())
