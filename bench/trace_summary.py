#!/usr/bin/env python3
"""Where an MD step's time goes, from a Chrome trace written with FLASHMACE_TRACE (engine/evaluation_trace.h).

A period is one evaluation's "flashmace::evaluate" range on the host plus what the process did until
the next one began (in LAMMPS: the rest of the MD step). Per period, averaged over the full periods of
the trace (every one but the last, and with three or more evaluations not the first either: the
profiler's collection starts during it, which delays its device work by up to milliseconds):
  - wall time, and the host time inside evaluate;
  - device busy time: the union of kernels, copies and fills on every stream, so overlapping streams
    count once; idle = wall - busy, split into idle while the host is inside evaluate and outside it;
  - kernels by name (launches and ms per period), copies (count, bytes, ms), host waits on the
    device (synchronisations, blocking copies) and the longest idle gaps with their neighbours;
  - on a CPU run (no device activity), the ATen operators inside evaluate by host time.

Usage: trace_summary.py TRACE.json [--top 20] [--gaps 10] [--json OUT.json]
"""
import argparse
import json
import sys

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
EVALUATE = "flashmace::evaluate"
HOST_WAITS = ("Synchronize", "cudaMemcpy(", "cudaMemcpy ", "cudaMemcpyDtoH", "cudaMemcpyHtoD")


def load_events(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]


def union_length(intervals, lo, hi):
    """Length of the union of [start, end) intervals clipped to [lo, hi)."""
    total, end = 0.0, lo
    for s, e in sorted(intervals):
        s, e = max(s, end), min(e, hi)
        if e > s:
            total += e - s
            end = e
    return total


def idle_gaps(spans, lo, hi):
    """The idle stretches of [lo, hi) not covered by any (start, end, name) span: (start, end, name of
    the span that ended last before it, name of the span that starts it)."""
    gaps, end, last = [], lo, "-"
    for s, e, name in sorted(spans):
        if e <= lo:
            continue
        if s >= hi:
            break
        if s > end:
            gaps.append((end, s, last, name))
        if e > end:
            end, last = e, name
    if end < hi:
        gaps.append((end, hi, last, "-"))
    return gaps


def short(name, width=90):
    return name if len(name) <= width else name[: width - 3] + "..."


def summarize(events, top, ngaps):
    # (the host's range; Kineto also draws it on the device's lanes, as gpu_user_annotation)
    evaluations = sorted((e for e in events if e["name"] == EVALUATE and e.get("cat") == "user_annotation"),
                         key=lambda e: e["ts"])
    if len(evaluations) < 2:
        raise SystemExit(f"trace_summary: {len(evaluations)} '{EVALUATE}' ranges in the trace; need 2 or more "
                         "(FLASHMACE_TRACE=FILE:FIRST:COUNT with COUNT >= 2)")
    device = sorted((e for e in events if e.get("cat") in DEVICE_CATS), key=lambda e: e["ts"])
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    # (with three or more, the first is left out: CUPTI starts its collection during it)
    kept = evaluations[1:] if len(evaluations) >= 3 else evaluations
    periods = [(a["ts"], b["ts"], a["ts"] + a["dur"]) for a, b in zip(kept, kept[1:])]
    n = len(periods)
    out = {"evaluations": len(evaluations), "periods": n, "device_activity": bool(device)}
    wall = sum(hi - lo for lo, hi, _ in periods)
    inside = sum(end - lo for lo, _, end in periods)
    out["wall_ms"] = wall / n / 1e3
    out["host_inside_evaluate_ms"] = inside / n / 1e3
    lo_all, hi_all = periods[0][0], periods[-1][1]

    def within(e):
        return lo_all <= e["ts"] < hi_all

    if device:
        named = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in device if within(e)]
        spans = [(s, e) for s, e, _ in named]
        busy = sum(union_length(spans, lo, hi) for lo, hi, _ in periods)
        busy_inside = sum(union_length(spans, lo, end) for lo, _, end in periods)
        out["device_busy_ms"] = busy / n / 1e3
        out["device_idle_ms"] = (wall - busy) / n / 1e3
        out["device_idle_inside_evaluate_ms"] = (inside - busy_inside) / n / 1e3
        out["device_idle_outside_evaluate_ms"] = out["device_idle_ms"] - out["device_idle_inside_evaluate_ms"]
        kernels = {}
        for e in device:
            if within(e) and e["cat"] == "kernel":
                k = kernels.setdefault(e["name"], [0, 0.0])
                k[0] += 1
                k[1] += e["dur"]
        out["kernels"] = [{"name": name, "per_period": c / n, "ms": d / n / 1e3}
                          for name, (c, d) in sorted(kernels.items(), key=lambda kv: -kv[1][1])]
        copies = [e for e in device if within(e) and e["cat"] != "kernel"]
        out["copies"] = {"per_period": len(copies) / n,
                         "bytes": sum(e.get("args", {}).get("bytes", 0) for e in copies) / n,
                         "ms": sum(e["dur"] for e in copies) / n / 1e3}
        waits = {}
        for e in runtime:
            if within(e) and any(w in e["name"] for w in HOST_WAITS):
                w = waits.setdefault(e["name"], [0, 0.0])
                w[0] += 1
                w[1] += e["dur"]
        out["host_waits"] = [{"name": name, "per_period": c / n, "ms": d / n / 1e3}
                             for name, (c, d) in sorted(waits.items(), key=lambda kv: -kv[1][1])]
        gaps = []
        for lo, hi, end in periods:
            for s, e, before, after in idle_gaps(named, lo, hi):
                gaps.append({"us": e - s, "at_us": s - lo, "inside_evaluate": s < end, "before": before,
                             "after": after})
        out["longest_gaps"] = sorted(gaps, key=lambda g: -g["us"])[:ngaps]
    ranges = [(lo, end) for lo, _, end in periods]
    host = {}
    for e in ops:
        if any(lo <= e["ts"] < end for lo, end in ranges):
            h = host.setdefault(e["name"], [0, 0.0])
            h[0] += 1
            h[1] += e["dur"]
    out["host_ops"] = [{"name": name, "per_period": c / n, "ms": d / n / 1e3}
                       for name, (c, d) in sorted(host.items(), key=lambda kv: -kv[1][1])][:top]
    if device:
        out["kernels"] = out["kernels"][:top]
    return out


def render(s):
    lines = [f"{s['evaluations']} evaluations traced; averages over {s['periods']} periods "
             f"(an evaluation and what the process did until the next one)",
             f"  wall                         {s['wall_ms']:10.3f} ms",
             f"  host inside evaluate         {s['host_inside_evaluate_ms']:10.3f} ms"]
    if s["device_activity"]:
        lines += [f"  device busy (all streams)    {s['device_busy_ms']:10.3f} ms",
                  f"  device idle                  {s['device_idle_ms']:10.3f} ms",
                  f"    while inside evaluate      {s['device_idle_inside_evaluate_ms']:10.3f} ms",
                  f"    while outside evaluate     {s['device_idle_outside_evaluate_ms']:10.3f} ms",
                  f"  copies and fills             {s['copies']['per_period']:10.1f} per period, "
                  f"{s['copies']['bytes'] / 1e6:.3f} MB, {s['copies']['ms']:.3f} ms",
                  "", "kernels (per period):", f"  {'launches':>8} {'ms':>9}  name"]
        lines += [f"  {k['per_period']:8.1f} {k['ms']:9.3f}  {short(k['name'])}" for k in s["kernels"]]
        lines += ["", "host waits on the device (per period):"]
        lines += [f"  {w['per_period']:8.1f} {w['ms']:9.3f}  {w['name']}" for w in s["host_waits"]] or ["  none"]
        lines += ["", "longest idle gaps of the device:", f"  {'us':>8} {'at us':>9} {'where':>8}  between"]
        lines += [f"  {g['us']:8.1f} {g['at_us']:9.1f} {'inside' if g['inside_evaluate'] else 'outside':>8}  "
                  f"{short(g['before'], 50)} -> {short(g['after'], 50)}" for g in s["longest_gaps"]]
    else:
        lines.append("  no device activity in the trace (a CPU run)")
    lines += ["", "host operators inside evaluate (per period):", f"  {'calls':>8} {'ms':>9}  name"]
    lines += [f"  {h['per_period']:8.1f} {h['ms']:9.3f}  {short(h['name'])}" for h in s["host_ops"]]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=20, help="kernels and host operators listed")
    p.add_argument("--gaps", type=int, default=10, help="idle gaps listed")
    p.add_argument("--json", help="also write the summary here")
    a = p.parse_args(argv)
    s = summarize(load_events(a.trace), a.top, a.gaps)
    print(render(s))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
