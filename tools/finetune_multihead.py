#!/usr/bin/env python3
"""A two-head Cu-Ni model made by mace-torch's own multi-head fine-tuning, exported to a flashmace file.

  finetune_multihead.py OUT_DIR [--seed N] [--epochs N] [--lmp lmp] [--eam FILE] [--output FILE]

Toy-sized, CPU, float64 (about a minute on two cores): the workflow of a real fine-tune, not its accuracy.
  1. data: two EAM-labelled Cu-Ni sets of 16 configurations (make_cuni_data.py's smoke plan), one to
     pretrain on (seed N) and one to fine-tune on (seed N + 1): OUT_DIR/pretrain-data, finetune-data
  2. foundation: a tiny one-head MACE trained on the first set by mace-torch's trainer (train_cuni.py's
     smoke preset, --epochs epochs): OUT_DIR/foundation/CuNi.model
  3. fine-tune: mace_run_train --foundation_model=... --multiheads_finetuning=True, the second set
     for the new head and the first as the replay data of the foundation's (--pt_train_file); the
     model's heads are mace-torch's: pt_head (the foundation's) and Default: OUT_DIR/finetune/CuNi-ft.model
  4. export: tools/export_mace.py's export_model on that .model, every head kept:
     --output (default OUT_DIR/CuNi-two-heads.safetensors)
The trainer runs as `python -m mace.cli.run_train` (what mace_run_train runs) with this interpreter, in
OUT_DIR; everything it writes stays there. The same seed gives the same data and, on the same
software, the same model.
"""
import argparse
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from cuni import dataset, extxyz, training  # noqa: E402
from make_cuni_data import DEFAULT_EAM  # noqa: E402

NAME = "CuNi-ft"


def finetune_args(foundation, pretrain_data, finetune_data, work_dir, seed, epochs):
    """mace_run_train's arguments for the multi-head fine-tune."""
    return [f"--name={NAME}", f"--seed={seed}", "--device=cpu", "--default_dtype=float64", f"--work_dir={work_dir}",
            f"--foundation_model={foundation}", "--multiheads_finetuning=True",
            f"--train_file={os.path.join(finetune_data, 'train.xyz')}",
            f"--valid_file={os.path.join(finetune_data, 'valid.xyz')}",
            # Replay data of the foundation's head: without --pt_train_file a local foundation model
            # (not one of mace-torch's downloadable ones) silently turns multi-head fine-tuning off.
            f"--pt_train_file={os.path.join(pretrain_data, 'train.xyz')}",
            f"--pt_valid_file={os.path.join(pretrain_data, 'valid.xyz')}",
            f"--energy_key={extxyz.ENERGY_KEY}", f"--forces_key={extxyz.FORCES_KEY}",
            f"--stress_key={extxyz.STRESS_KEY}",
            # Multi-head mode refuses E0s=average. `estimated`: the foundation's E0s corrected by a
            # least-squares fit of its energy errors on the new data, so Default's E0s differ from pt_head's.
            "--E0s=estimated",
            # Without --force_mh_ft_lr the trainer sets lr 1e-4 and an EMA of decay 0.99999: after a
            # few steps the saved (averaged) weights are the foundation's and both heads' readouts
            # the same copy of its readout. lr 0.01 without EMA moves the heads' readouts apart.
            "--force_mh_ft_lr=True", "--lr=0.01",
            "--batch_size=4", "--valid_batch_size=4", f"--max_num_epochs={epochs}",
            "--save_cpu", "--plot=False", "--num_workers=0"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=2024, help="data and training seed")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the foundation and of the fine-tune")
    parser.add_argument("--lmp", default=os.environ.get("FLASHMACE_EAM_LMP", "lmp"),
                        help="LAMMPS executable with pair_style eam/alloy, for the labels")
    parser.add_argument("--eam", default=DEFAULT_EAM)
    parser.add_argument("--output", help="flashmace model file (default OUT_DIR/CuNi-two-heads.safetensors)")
    args = parser.parse_args(argv)
    out_dir = os.path.abspath(args.out_dir)
    output = os.path.abspath(args.output or os.path.join(out_dir, "CuNi-two-heads.safetensors"))
    os.makedirs(out_dir, exist_ok=True)
    # e3nn 0.4.4 (MACE's pin) reads its own constant tables with torch.load, which torch >= 2.6
    # refuses by default: for the trainer and for the exporter's import of mace below.
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    start = time.time()

    def stamp(what):
        print(f"finetune_multihead: [{time.time() - start:6.1f} s] {what}", flush=True)

    data = {}
    for role, seed in (("pretrain", args.seed), ("finetune", args.seed + 1)):
        data[role] = os.path.join(out_dir, f"{role}-data")
        manifest = dataset.generate(data[role], "smoke", seed, args.eam, args.lmp, jobs=2)
        stamp(f"{role} data (seed {seed}): {manifest['splits']['train']['configurations']} training configurations")

    foundation = training.train("smoke", data["pretrain"], os.path.join(out_dir, "foundation"), "cpu", "float64",
                                args.seed, args.epochs)
    stamp(f"foundation: {foundation}")

    work_dir = os.path.join(out_dir, "finetune")
    cmd = [sys.executable, "-m", "mace.cli.run_train",
           *finetune_args(foundation, data["pretrain"], data["finetune"], work_dir, args.seed, args.epochs)]
    stamp("fine-tune: " + " ".join(cmd))
    if subprocess.run(cmd, cwd=out_dir).returncode != 0:
        raise SystemExit(f"finetune_multihead: mace run_train failed; its log is in {work_dir}/logs")
    model = os.path.join(work_dir, f"{NAME}.model")

    from export_mace import export_model
    meta = export_model(model, output)
    stamp(f"exported {output}: heads {meta['heads']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
