#!/usr/bin/env python3
"""Times cuEquivariance's symmetric contraction alone on the MP-0-medium shapes, for comparison with
flashmace's SC executors (tests/sc/sc_gpu_bench on the same GPU, in the same job).

Per layer of the mp0-medium preset (tools/make_random_model.py): input 128x(0e+1o+2e+3o), output
128x0e+128x1o (layer 0) or 128x0e (layer 1), correlation 3, 89 elements, random weights and inputs,
every atom of one element drawn at random. Forward, and forward + backward to the input (the weights
need no gradient in MD), timed with CUDA events after a warm-up. Layouts: `ir_mul` in and out (the
kernel's own layout: no transposes) and MACE's call (`ir_mul` in, `mul_ir` out, original_mace
weights), as MACE + cuEquivariance runs it.

Needs cuequivariance and cuequivariance_torch with their CUDA ops (../shared/bench/kit).
Usage: cueq_sc_bench.py [--atoms 16384] [--repeats 20] [--dtype float32|float64]
"""
import argparse
import json

import torch


def time_ms(fn, repeats, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = parser.parse_args()

    import cuequivariance as cue
    import cuequivariance_torch as cuet

    dtype = getattr(torch, args.dtype)
    device = torch.device("cuda")
    torch.manual_seed(0)
    irreps_in = cue.Irreps("O3", "128x0e+128x1o+128x2e+128x3o")
    outputs = [cue.Irreps("O3", "128x0e+128x1o"), cue.Irreps("O3", "128x0e")]
    species = torch.randint(0, 89, (args.atoms,), device=device, dtype=torch.int32)
    print(f"cuEquivariance {cuet.__version__ if hasattr(cuet, '__version__') else ''} SC, {args.atoms} atoms, "
          f"{args.dtype}, {torch.cuda.get_device_name(0)}")
    totals = {}
    for layer, irreps_out in enumerate(outputs):
        for name, layout_in, layout_out, original in (("ir_mul", cue.ir_mul, cue.ir_mul, False),
                                                      ("mace", cue.ir_mul, cue.mul_ir, True)):
            sc = cuet.SymmetricContraction(irreps_in, irreps_out, 3, 89, layout_in=layout_in, layout_out=layout_out,
                                           original_mace=original, dtype=dtype, device=device)
            sc.weight.requires_grad_(False)
            x = torch.randn(args.atoms, irreps_in.dim, device=device, dtype=dtype)
            xg = x.clone().requires_grad_(True)
            dy = torch.randn(args.atoms, irreps_out.dim, device=device, dtype=dtype)
            with torch.no_grad():
                forward = time_ms(lambda: sc(x, species), args.repeats)

            def both():
                xg.grad = None
                sc(xg, species).backward(dy)

            fb = time_ms(both, args.repeats)
            totals[name] = totals.get(name, 0.0) + fb
            record = dict(layer=layer, layout=name, method=sc.method, atoms=args.atoms, dtype=args.dtype,
                          forward_ms=round(forward, 4), forward_backward_ms=round(fb, 4))
            print(json.dumps(record))
    for name, ms in totals.items():
        print(f"both layers, forward + backward ({name}): {ms:.3f} ms")


if __name__ == "__main__":
    main()
