"""Training a small Cu-Ni MACE with the official trainer (mace-torch's run_train), and reading back
its loss history.

The trainer runs as `python -m mace.cli.run_train` in a child process: the same interpreter as
ours, so a `PYTHONPATH` that carries mace-torch (a machine without it installed) works too."""
import glob
import json
import os
import shutil
import subprocess
import sys

from . import extxyz

NAME = "CuNi"

# The model of issue 13: small and fast. `smoke` is a toy of the same family for tests (a few
# optimizer steps on 16 configurations: checks the pipeline, not accuracy).
PRESETS = {
    # One H200, float64: ~7 s an epoch (2,124 configurations, batch 32); data + 40 epochs + export +
    # test errors took 7.1 min (tools/train_cuni_gpu.sh), test RMSE 1.8 meV/atom and 12.4 meV/A.
    "full": dict(num_channels=32, max_L=1, max_ell=2, correlation=3, num_interactions=2, r_max=5.0,
                 radial_MLP="[64, 64, 64]", num_radial_basis=8, batch_size=32, valid_batch_size=64,
                 max_num_epochs=40, stage_two_epoch=30, lr=0.01, scheduler_patience=5, eval_interval=2),
    "smoke": dict(num_channels=8, max_L=1, max_ell=2, correlation=2, num_interactions=2, r_max=5.0,
                  radial_MLP="[16, 16]", num_radial_basis=6, batch_size=4, valid_batch_size=4,
                  max_num_epochs=10, stage_two_epoch=None, lr=0.01, scheduler_patience=5, eval_interval=1),
}


def trainer_args(preset, data_dir, work_dir, device, dtype, seed, epochs=None):
    p = dict(PRESETS[preset])
    if epochs is not None:
        p["max_num_epochs"] = epochs
        if p["stage_two_epoch"]:
            # The trainer keeps stage-two checkpoints only on evaluation epochs, and fails at the
            # end without one: start stage two on one.
            start = int(0.75 * epochs) // p["eval_interval"] * p["eval_interval"]
            p["stage_two_epoch"] = start if start > 0 else None
    args = [f"--name={NAME}", f"--seed={seed}", f"--device={device}", f"--default_dtype={dtype}",
            f"--work_dir={work_dir}", "--model=MACE",
            f"--train_file={os.path.join(data_dir, 'train.xyz')}",
            f"--valid_file={os.path.join(data_dir, 'valid.xyz')}",
            f"--test_file={os.path.join(data_dir, 'test.xyz')}",
            f"--energy_key={extxyz.ENERGY_KEY}", f"--forces_key={extxyz.FORCES_KEY}",
            f"--stress_key={extxyz.STRESS_KEY}",
            "--E0s=average",  # per-element energies by least squares over the training set
            # Energy weighted up from MACE's default of 1: the energy limit (5 meV/atom) is
            # the harder one to meet, forces (60 meV/A) come first.
            "--compute_stress=True", "--loss=stress", "--energy_weight=10.0", "--forces_weight=100.0",
            "--stress_weight=10.0", "--error_table=PerAtomRMSEstressvirials",
            f"--num_channels={p['num_channels']}", f"--max_L={p['max_L']}", f"--max_ell={p['max_ell']}",
            f"--correlation={p['correlation']}", f"--num_interactions={p['num_interactions']}",
            f"--r_max={p['r_max']}", f"--radial_MLP={p['radial_MLP']}",
            f"--num_radial_basis={p['num_radial_basis']}",
            f"--batch_size={p['batch_size']}", f"--valid_batch_size={p['valid_batch_size']}",
            f"--max_num_epochs={p['max_num_epochs']}", f"--lr={p['lr']}",
            f"--scheduler_patience={p['scheduler_patience']}", f"--eval_interval={p['eval_interval']}",
            "--ema", "--ema_decay=0.99", "--amsgrad", "--save_cpu", "--plot=False", "--num_workers=0"]
    if p["stage_two_epoch"]:
        # Stage two: the last quarter with a lower learning rate and energy weighted up, which
        # is what sets the energy-volume curve (lattice constants, bulk modulus) precisely.
        args += ["--swa", f"--start_swa={p['stage_two_epoch']}", "--swa_energy_weight=1000.0",
                 "--swa_forces_weight=100.0", "--swa_stress_weight=10.0", "--swa_lr=0.001"]
    return args


def train(preset, data_dir, work_dir, device="cpu", dtype="float64", seed=1, epochs=None):
    """Runs the trainer; returns the path of the final model (the stage-two one if used)."""
    # A fresh folder: the trainer resumes from checkpoints it finds, which would mix two runs.
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    env = dict(os.environ)
    # e3nn 0.4.4 (MACE's pin) reads its own constant tables with torch.load, which torch >= 2.6
    # refuses by default.
    env.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    cmd = [sys.executable, "-m", "mace.cli.run_train",
           *trainer_args(preset, data_dir, work_dir, device, dtype, seed, epochs)]
    print("train_cuni: " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"mace run_train failed (exit {proc.returncode}); its log is in {work_dir}/logs")
    return final_model(work_dir)


def final_model(work_dir):
    stage_two = os.path.join(work_dir, f"{NAME}_stagetwo.model")
    plain = os.path.join(work_dir, f"{NAME}.model")
    for path in (stage_two, plain):
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {NAME}.model in {work_dir}")


def loss_history(work_dir):
    """(train, valid): the optimizer's per-step training losses in order, and the validation
    losses by epoch (the first one, epoch None, is before any step), from the trainer's metrics
    file results/<tag>_train.txt (one JSON object a line)."""
    files = sorted(glob.glob(os.path.join(work_dir, "results", f"{NAME}_run-*_train.txt")))
    if not files:
        raise FileNotFoundError(f"no trainer metrics file under {work_dir}/results")
    train, valid = [], []
    with open(files[-1]) as f:
        for line in f:
            record = json.loads(line)
            if record.get("mode") == "opt":
                train.append(float(record["loss"]))
            elif record.get("mode") == "eval":
                valid.append((record.get("epoch"), float(record["loss"])))
    return train, valid
