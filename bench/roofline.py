#!/usr/bin/env python3
"""Where the fast engine's GPU step stands against the hardware's limits: Nsight Compute (ncu) on one
flashmace-bench step, per kernel family.

Runs flashmace-bench under ncu with collection off until the bench's --profile-step: one step as MD
runs it (its CUDA graph replayed; ncu --graph-profiling node profiles each of the graph's kernels), after
the warm-up and timed steps, so that no setup or list build is in the profile. It profiles the kernels
whose function names match --kernels (the default, names that start in lower case, leaves out CUB's
Device* scans, whose kernel replay has hung ncu on this engine). Per kernel it collects the duration,
the DRAM bytes read and written, the FP32 instructions (FFMA counts twice) and ncu's own SM and
tensor-pipe utilisation. Per family (the kernel's function
name and first parameter type) it prints launches, time, share of the step's kernel time,
achieved FP32 TFLOP/s and DRAM TB/s with their fractions of --fp32-peak and --hbm-peak, FLOP per
DRAM byte and the utilisations (time-weighted).

    bench/roofline.py --bench BUILD/bin/flashmace-bench --model mp0-medium-f32.safetensors --cells 10 \\
        --out roofline.md

Writes the table (Markdown) to --out and the raw rows as JSON beside it.
"""
import argparse
import csv
import io
import json
import re
import subprocess
import sys

DURATION = "gpu__time_duration.sum"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
REQUIRED = (DURATION, DRAM_READ, DRAM_WRITE, FFMA, FADD, FMUL, SM)
OPTIONAL = (TENSOR,)
# Our kernels, ATen's and cuBLAS's (lower-case names, and ATen's CatArrayBatchedCopy); not CUB's Device*.
DEFAULT_KERNELS = "regex:^([a-z]|Cat)"

# Duration units ncu may print, in seconds; byte units in bytes.
TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
              "second": 1.0}
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9,
              "Kibyte": 1024.0, "Mibyte": 1024.0 ** 2, "Gibyte": 1024.0 ** 3}


def number(text):
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def family(name):
    """A kernel's function name without return type, namespaces and template arguments, with its first
    parameter's type where it has parameters (flashmace has several forward_kernel's)."""
    text = name.replace("(anonymous namespace)", "")
    while True:  # template argument lists, innermost first (also `<unnamed>`)
        stripped = re.sub(r"<[^<>]*>", "", text)
        if stripped == text:
            break
        text = stripped
    head, _, params = text.partition("(")
    base = [part for part in head.split()[-1].split("::") if part][-1] if head.split() else name
    first = params.split(",")[0].rstrip(")").strip()
    first = [part for part in first.split("::") if part][-1].strip() if first else ""
    return f"{base}({first})" if first else base


def parse_ncu_csv(text):
    """Rows of `ncu --csv --page raw` output: one dict per kernel launch with seconds, bytes, fp32
    flops and the utilisations (percent). The first data row after the header holds the units."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if len(lines) < 2:
        raise ValueError("no ncu CSV rows in the output")
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = next(reader)
    units = dict(zip(header, next(reader)))
    col = {name: i for i, name in enumerate(header)}
    for metric in REQUIRED:
        if metric not in col:
            raise ValueError(f"ncu CSV has no column {metric}")
    rows = []
    for values in reader:
        get = lambda metric: number(values[col[metric]]) if metric in col else None  # noqa: E731
        seconds = get(DURATION) * TIME_UNITS[units[DURATION]]
        dram = (get(DRAM_READ) * BYTE_UNITS[units[DRAM_READ]] + get(DRAM_WRITE) * BYTE_UNITS[units[DRAM_WRITE]])
        rows.append({"kernel": values[col["Kernel Name"]], "family": family(values[col["Kernel Name"]]),
                     "seconds": seconds, "dram_bytes": dram, "fp32_flops": 2 * get(FFMA) + get(FADD) + get(FMUL),
                     "sm_pct": get(SM), "tensor_pct": get(TENSOR)})
    return rows


def summarise(rows, fp32_peak_tflops, hbm_peak_tbps):
    """Per family: launches, time, share, achieved FP32 and DRAM rates and their fractions of the
    peaks, time-weighted utilisations; sorted by time."""
    total = sum(r["seconds"] for r in rows)
    fams = {}
    for r in rows:
        f = fams.setdefault(r["family"], {"family": r["family"], "launches": 0, "seconds": 0.0, "dram_bytes": 0.0,
                                          "fp32_flops": 0.0, "sm_weighted": 0.0, "tensor_weighted": None})
        f["launches"] += 1
        f["seconds"] += r["seconds"]
        f["dram_bytes"] += r["dram_bytes"]
        f["fp32_flops"] += r["fp32_flops"]
        f["sm_weighted"] += r["sm_pct"] * r["seconds"]
        if r["tensor_pct"] is not None:
            f["tensor_weighted"] = (f["tensor_weighted"] or 0.0) + r["tensor_pct"] * r["seconds"]
    out = []
    for f in fams.values():
        s = f["seconds"]
        tflops = f["fp32_flops"] / s / 1e12 if s > 0 else 0.0
        tbps = f["dram_bytes"] / s / 1e12 if s > 0 else 0.0
        out.append({"family": f["family"], "launches": f["launches"], "ms": 1e3 * s,
                    "share": s / total if total > 0 else 0.0, "fp32_tflops": tflops,
                    "fp32_fraction": tflops / fp32_peak_tflops, "dram_tbps": tbps, "dram_fraction": tbps / hbm_peak_tbps,
                    "flops_per_byte": f["fp32_flops"] / f["dram_bytes"] if f["dram_bytes"] > 0 else None,
                    "sm_pct": f["sm_weighted"] / s if s > 0 else 0.0,
                    "tensor_pct": f["tensor_weighted"] / s if s > 0 and f["tensor_weighted"] is not None else None})
    return sorted(out, key=lambda f: -f["ms"])


def table(summary):
    lines = ["| kernel family | launches | ms | share | FP32 TFLOP/s (of peak) | DRAM TB/s (of peak) | FLOP/byte | "
             "SM busy % | tensor pipe % |", "|---|---|---|---|---|---|---|---|---|"]
    for f in summary:
        intensity = "" if f["flops_per_byte"] is None else f"{f['flops_per_byte']:.1f}"
        tensor = "" if f["tensor_pct"] is None else f"{f['tensor_pct']:.0f}"
        lines.append(f"| {f['family']} | {f['launches']} | {f['ms']:.3f} | {100 * f['share']:.1f} % | "
                     f"{f['fp32_tflops']:.2f} ({100 * f['fp32_fraction']:.0f} %) | "
                     f"{f['dram_tbps']:.2f} ({100 * f['dram_fraction']:.0f} %) | {intensity} | {f['sm_pct']:.0f} | {tensor} |")
    return "\n".join(lines)


def available_metrics(ncu):
    proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="the flashmace-bench executable")
    p.add_argument("--model", required=True)
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--ncu", default="ncu")
    p.add_argument("--kernels", default=DEFAULT_KERNELS, help="ncu --kernel-name filter")
    p.add_argument("--fp32-peak", type=float, default=66.9, help="FP32 TFLOP/s of the GPU (H200 SXM: 66.9)")
    p.add_argument("--hbm-peak", type=float, default=4.8, help="HBM TB/s of the GPU (H200: 4.8)")
    p.add_argument("--bench-args", default="", help="more flashmace-bench arguments")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    known = available_metrics(args.ncu)
    missing = [m for m in REQUIRED if m.split(".")[0] not in known]
    if missing:
        sys.exit(f"roofline: ncu does not know {', '.join(missing)}")
    metrics = list(REQUIRED) + [m for m in OPTIONAL if m.split(".")[0] in known]
    cmd = [args.ncu, "--csv", "--page", "raw", "--metrics", ",".join(metrics), "--kernel-name", args.kernels,
           "--profile-from-start", "off", "--graph-profiling", "node", args.bench, "--model", args.model, "--device",
           "cuda", "--a", "3.61", "--cells", str(args.cells), "--dtype", args.dtype, "--warmup", "2", "--steps", "1",
           "--no-breakdown", "--profile-step", *args.bench_args.split()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"roofline: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}\n{proc.stdout[-3000:]}")
    rows = parse_ncu_csv(proc.stdout)
    summary = summarise(rows, args.fp32_peak, args.hbm_peak)
    text = (f"ncu on flashmace-bench --cells {args.cells} --dtype {args.dtype}, one MD step (its CUDA graph's kernels): "
            f"{len(rows)} launches, {sum(r['seconds'] for r in rows) * 1e3:.3f} ms of kernel time (each kernel "
            f"alone, caches flushed); peaks: FP32 "
            f"{args.fp32_peak} TFLOP/s, HBM {args.hbm_peak} TB/s\n\n" + table(summary) + "\n\nCommand: " + " ".join(cmd))
    with open(args.out, "w") as f:
        f.write(text + "\n")
    with open(args.out + ".json", "w") as f:
        json.dump({"rows": rows, "summary": summary, "command": cmd}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
