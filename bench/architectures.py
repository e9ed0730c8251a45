#!/usr/bin/env python3
"""flashmace-bench on every MACE foundation architecture (tools/make_random_model.py's presets,
random weights): ms/step, atom-steps/s and peak memory on a random alloy of three of the
architecture's elements, per size, in one job.

The models hold only the structure's elements (make_random_model.py --elements): an evaluation
touches the weights of the elements present only, so the step is the full model's, and the files
stay small enough to copy to a GPU machine. The structure: a random fcc alloy (a = 3.61 A, rattled
0.05 A) of the first three elements of --elements that the architecture knows (MP-0 family: Cu, Ni,
Al; MACE-OFF's organic set: C, N, O).

Usage: architectures.py --bench build/bin/flashmace-bench --atoms 4000,62500 [--device cuda]
                        [--dtype float32] [--presets mp0b-medium,...] [--models DIR] [--out DIR]
                        [--steps 5] [--make-only]
--make-only writes the model files into --models and stops (make them where mace-torch is, run the
benchmark where the GPU is). Writes OUT/architectures.md and OUT/architectures.json.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))


def elements_for(preset):
    return "C,N,O" if preset.startswith("off") else "Cu,Ni,Al"


def make_models(presets, directory, dtype):
    import make_random_model
    os.makedirs(directory, exist_ok=True)
    for preset in presets:
        path = os.path.join(directory, f"{preset}.safetensors")
        if not os.path.exists(path):
            make_random_model.main([preset, path, "--dtype", dtype, "--elements", elements_for(preset)])


def run(bench, model, atoms, device, dtype, steps, elements, path, json_path):
    cmd = [bench, "--model", model, "--atoms", str(atoms), "--elements", elements, "--device", device,
           "--dtype", dtype, "--path", path, "--warmup", "2", "--steps", str(steps), "--no-breakdown",
           "--json", json_path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, " ".join(cmd), proc.stderr.strip().splitlines()[-1:] or ["failed"]
    with open(json_path) as f:
        return json.load(f)["result"], " ".join(cmd), None


def main(argv=None):
    import make_random_model
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", help="flashmace-bench")
    parser.add_argument("--atoms", default="4000,62500")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--presets", default=",".join(p for p in make_random_model.PRESETS if not p.startswith("tiny-")))
    parser.add_argument("--models", default="architecture-models")
    parser.add_argument("--out", default="architectures-out")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--make-only", action="store_true")
    args = parser.parse_args(argv)
    presets = args.presets.split(",")
    unknown = [p for p in presets if p not in make_random_model.PRESETS]
    if unknown:
        parser.error(f"unknown presets {unknown}; make_random_model.py knows {sorted(make_random_model.PRESETS)}")
    if args.make_only or not all(os.path.exists(os.path.join(args.models, f"{p}.safetensors")) for p in presets):
        make_models(presets, args.models, args.dtype)
    if args.make_only:
        return 0
    if not args.bench:
        parser.error("--bench is needed unless --make-only")
    os.makedirs(args.out, exist_ok=True)
    sizes = [int(a) for a in args.atoms.split(",")]
    rows, records = [], []
    for preset in presets:
        model = os.path.join(args.models, f"{preset}.safetensors")
        p = make_random_model.PRESETS[preset]
        for atoms in sizes:
            result, cmd, error = run(args.bench, model, atoms, args.device, args.dtype, args.steps,
                                     elements_for(preset), "fast", os.path.join(args.out, f"{preset}-{atoms}.json"))
            records.append({"preset": preset, "atoms": atoms, "command": cmd, "result": result, "error": error})
            if result is None:
                rows.append(f"| {preset} | {p['hidden']} | {atoms:,} | - | - | - | - | failed: {error[0]} |")
            else:
                rows.append(f"| {preset} | {p['hidden']} | {result['atoms']:,} | {result['edges']:,} | "
                            f"{result['ms_per_step']:.2f} | {result['atom_steps_per_s']:,.0f} | "
                            f"{result['peak_memory_bytes'] / 2**20:,.0f} | |")
            print(rows[-1], flush=True)
    table = ["| preset | hidden irreps | atoms | edges | ms/step | atom-steps/s | peak MiB | note |",
             "|---|---|---|---|---|---|---|---|"] + rows
    text = (f"# MACE foundation architectures (random weights): flashmace-bench, {args.device}, {args.dtype}\n\n"
            + "\n".join(table) + "\n\nMade by: bench/architectures.py " + " ".join(argv or sys.argv[1:]) + "\n")
    with open(os.path.join(args.out, "architectures.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "architectures.json"), "w") as f:
        json.dump(records, f, indent=1)
    print(text)
    return 1 if any(r["error"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
