"""flashmace-bench runs end to end in a tiny CPU configuration, so that it cannot rot: the numbers
it reports are internally consistent (structure size, edge count, throughput, breakdown)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

BENCH = os.environ["FLASHMACE_BENCH"]
MODEL = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "potentials", "testing", "tiny-cuni-random.safetensors")


def run(tmp_path, *args):
    out = tmp_path / "bench.json"
    proc = subprocess.run([BENCH, "--model", MODEL, "--warmup", "1", "--steps", "2", "--json", str(out), *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), proc.stdout


STAGES = {"reference": ("spherical_harmonics", "radial", "tensor_product", "symmetric_contraction", "linears",
                        "readout", "backward"),
          "fast": ("graph", "edges_forward", "nodes_forward", "nodes_backward", "edges_backward")}


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_tiny_fcc_benchmark_reports_consistent_numbers(tmp_path, path):
    report, stdout = run(tmp_path, "--cells", "2", "--elements", "Cu,Ni", "--path", path)
    assert report["path"] == path
    r = report["result"]
    assert r["atoms"] == 32  # 2x2x2 fcc conventional cells
    # r_max 4.5 A with a = 3.61: 12 + 6 + 24 = 42 neighbours inside 4.5 A for an ideal fcc lattice;
    # the 0.05 A perturbation moves few pairs across the cutoff.
    assert 38 * 32 <= r["edges"] <= 46 * 32
    assert r["ms_per_step"] > 0
    assert np.isclose(r["atom_steps_per_s"], r["atoms"] / (r["ms_per_step"] * 1e-3))
    for stage in STAGES[path]:
        assert r["stage_ms"][stage] > 0, stage
    assert "ms/step" in stdout and "breakdown" in stdout


def test_breakdown_gives_each_stage_its_memory_peak(tmp_path):
    # On the CPU the probe reads the blocks of 1 MiB or more that the step holds; the breakdown's steps
    # are the timed steps again, so the largest stage peak is the timed steps' peak, and the stages that
    # hold per-edge gradients (the backward passes) hold more than the geometry at the start.
    report, stdout = run(tmp_path, "--cells", "5", "--elements", "Cu,Ni")
    r = report["result"]
    peaks = r["stage_peak_memory_bytes"]
    assert set(peaks) == set(r["stage_ms"])
    assert r["cpu_block_peak_bytes"] > 0
    assert max(peaks.values()) == r["cpu_block_peak_bytes"]
    assert peaks["edges_backward"] > peaks["edge_geometry"] > 0
    assert r["cpu_block_peak_bytes"] <= r["peak_memory_bytes"]  # (within the process's resident peak)
    # (the allocator's reserved peak is a GPU reading: none on the CPU, and no GPU line)
    assert r["peak_reserved_bytes"] == 0 and "GPU memory" not in stdout
    assert "MiB" in stdout.split("breakdown")[1]


def test_sweep_stops_at_the_bound_and_reports_the_largest(tmp_path):
    report, stdout = run(tmp_path, "--cells", "1", "--max-cells", "2", "--sweep", "--no-breakdown")
    assert [s["atoms"] for s in report["sweep"]] == [4, 32]
    assert report["largest_atoms"] == 32
    assert "largest system that fits: 32 atoms" in stdout


def test_bad_arguments_fail_with_a_message(tmp_path):
    proc = subprocess.run([BENCH, "--model", MODEL, "--path", "quick"], capture_output=True, text=True)
    assert proc.returncode == 1 and "--path quick: use fast or reference" in proc.stderr


def test_ordered_compounds_have_their_cells_and_shells(tmp_path):
    # rock salt of the model's two elements, a = 4.2: 8 atoms per cell; neighbours within r_max 4.5 A
    # of an ideal rock salt: 6 at 2.1, 12 at 2.97, 8 at 3.64, 6 at 4.2 = 32 (the next, 24 at 4.70, is out)
    report, _ = run(tmp_path, "--lattice", "rocksalt", "--elements", "Cu,Ni", "--a", "4.2", "--cells", "2",
                    "--no-breakdown")
    r = report["result"]
    assert r["atoms"] == 64
    assert 30 * 64 <= r["edges"] <= 34 * 64
    proc = subprocess.run([BENCH, "--model", MODEL, "--lattice", "perovskite", "--elements", "Cu,Ni"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Lattice perovskite needs 3 elements (A, B and X of ABX3, e.g. Sr,Ti,O), got 2" in proc.stderr


def test_skin_mode_times_steps_on_a_list_with_its_skin(tmp_path):
    report, stdout = run(tmp_path, "--cells", "2", "--elements", "Cu,Ni", "--skin", "1.0", "--no-breakdown")
    r = report["result"]
    # pairs within r_max + 1 A = 5.5 A: the fcc shells at 2.55, 3.61, 4.42 and 5.11 A (12 + 6 + 24 + 12 = 54
    # neighbours) against 42 within r_max = 4.5 A; the 0.05 A perturbation moves few pairs across 5.5 A
    assert 52 * 32 <= r["listed_pairs"] <= 56 * 32 and r["listed_pairs"] > r["edges"]
    assert r["skin_ms_per_step"] > 0 and r["skin_list_build_step_ms"] > 0
    assert "MD steps on a skin list" in stdout


def test_architectures_script_tables_each_preset(tmp_path):
    """bench/architectures.py: a model per preset (its elements only), flashmace-bench per size, one
    row each with the engine's own numbers; a reference-only preset runs on the reference path."""
    script = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench", "architectures.py")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, script,
                           "--bench", BENCH, "--presets", "mp0b-small,off23-small", "--atoms", "32",
                           "--device", "cpu", "--dtype", "float64", "--steps", "1",
                           "--models", str(tmp_path / "models"), "--out", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((out / "architectures.json").read_text())
    assert [(r["preset"], r["atoms"]) for r in records] == [("mp0b-small", 32), ("off23-small", 32)]
    for r in records:
        with open(tmp_path / "out" / f"{r['preset']}-32.json") as f:
            assert json.load(f)["result"] == r["result"]
        assert r["result"]["atoms"] == 32 and r["result"]["ms_per_step"] > 0 and np.isfinite(r["result"]["energy"])
    table = (out / "architectures.md").read_text()
    assert "| mp0b-small | 128x0e | 32 |" in table and "| off23-small | 96x0e | 32 |" in table


def run_cpu_compare(tmp_path, *args):
    """bench/cpu_compare.py in the venv's Python, one thread per runner: (its JSON, its stdout)."""
    script = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench", "cpu_compare.py")
    out = tmp_path / "cpu_compare.json"
    proc = subprocess.run([sys.executable, script, "--bench", BENCH, "--threads", "1", "--rounds", "1",
                           "--json", str(out), *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def run_structures(tmp_path, *args):
    """bench/fastmace_structures.py without FastMACE: (its rows, its stdout, its exit code and stderr)."""
    script = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench", "fastmace_structures.py")
    proc = subprocess.run([sys.executable, script, "--bench", BENCH, "--model", MODEL, "--device", "cpu",
                           "--no-fastmace", "--warmup", "1", "--steps", "1", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=600)
    rows = json.loads((tmp_path / "structures.json").read_text()) if proc.returncode == 0 else None
    return rows, proc.stdout, proc.returncode, proc.stderr


def test_structures_script_builds_what_flashmace_bench_times(tmp_path):
    """The multi-element structures of bench/fastmace_structures.py through flashmace-bench --xyz: an
    ideal rock salt (a = 4.2, no perturbation) of 2^3 cells has 64 atoms, 32 of each element, and 32
    neighbours per atom within r_max 4.5 A (as flashmace-bench's own lattice above); a random fcc alloy
    2^3 cells, both elements drawn."""
    rows, stdout, code, err = run_structures(tmp_path, "--sizes", "2", "--perturb", "0",
                                             "--structures", "rocksalt:Cu,Ni:4.2", "fcc:Cu,Ni")
    assert code == 0, err
    salt, alloy = rows
    assert salt["atoms"] == 64 and salt["edges"] == 32 * 64 and salt["ms"] > 0 and salt["peak_mib"] > 0
    assert math.isfinite(salt["energy"]) and salt["energy"] != alloy["energy"]
    assert alloy["atoms"] == 32 and alloy["edges"] == 42 * 32 and alloy["ms"] > 0  # ideal fcc: 12 + 6 + 24
    assert salt["fastmace_ms"] is None and "| rocksalt:Cu,Ni:4.2 | 64 | 2048 | " in stdout
    symbols = (tmp_path / "rocksalt_Cu_Ni_4_2_c2.xyz").read_text().split()
    assert symbols.count("Cu") == 32 and symbols.count("Ni") == 32
    assert "Ni" in (tmp_path / "fcc_Cu_Ni_c2.xyz").read_text() and "Cu" in (tmp_path / "fcc_Cu_Ni_c2.xyz").read_text()
    _, _, code, err = run_structures(tmp_path, "--structures", "perovskite:Cu,Ni")
    assert code == 2 and "perovskite needs 3 elements, one per sublattice" in err


def test_cpu_compare_times_flashmace_and_mace_torch_on_the_same_energies(tmp_path):
    """bench/cpu_compare.py on the tiny model file (mace-torch: its preset rebuilt with the file's
    weights), 2x2x2 cells: a row per runner and dtype, positive times, the ratio the quotient of the
    medians, the same edges, and the float64 energies equal to round-off."""
    report, stdout = run_cpu_compare(tmp_path, "--model", MODEL, "--cells", "2", "--dtype", "float32,float64")
    rows = {(r["runner"], r["dtype"]): r for r in report["rows"]}
    assert set(rows) == {(runner, dtype) for runner in ("flashmace", "mace-torch") for dtype in ("float32", "float64")}
    for (runner, dtype), r in rows.items():
        assert r["atoms"] == 32 and r["median_ms"] > 0 and r["min_ms"] > 0
        assert r["edges"] == rows["flashmace", dtype]["edges"]
        assert r["ratio_to_flashmace"] == pytest.approx(r["median_ms"] / rows["flashmace", dtype]["median_ms"])
        assert f"| {runner} | {dtype} | 32 | {r['edges']} | " in stdout
    # float64: the same model in two implementations; 1e-6 eV/atom leaves room for summation order only
    assert rows["mace-torch", "float64"]["energy_diff_per_atom"] <= 1e-6
    assert "mace-torch / flashmace (float64): " in stdout and "hardware: " in stdout


def test_cpu_compare_builds_the_preset_for_both_runners(tmp_path):
    """Without --model: the preset's random model built and exported, one 4-atom cell, float64; with
    --spline also flashmace's tabulated radial MLPs, within the tables' error of the exact energy."""
    report, stdout = run_cpu_compare(tmp_path, "--preset", "tiny-cuni", "--seed", "3", "--cells", "1",
                                     "--dtype", "float64", "--spline")
    assert [r["runner"] for r in report["rows"]] == ["flashmace", "flashmace-spline", "mace-torch"]
    assert 0 < report["rows"][1]["energy_diff_per_atom"] <= 1e-6
    assert report["rows"][2]["energy_diff_per_atom"] <= 1e-6
    assert "flashmace-spline / flashmace (float64): " in stdout
    assert report["model"] == "tiny-cuni --seed 3"


def test_mode_error_script_measures_the_modes(tmp_path):
    # bench/mode_error.py on the CPU: float64 exact is the truth; automatic float64 tables are within
    # ~1e-10 of it but not equal, float32 (exact or splined) within its own precision.
    script = os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench", "mode_error.py")
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, script, "--eval", os.environ["FLASHMACE_EVAL"], "--model", MODEL,
                           "--cells", "2", "--json", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = {(r["dtype"], r["radial"]): r for r in json.loads(out.read_text())}
    assert set(rows) == {("float64", "spline"), ("float32", "exact"), ("float32", "spline")}
    assert 0 < rows[("float64", "spline")]["force_error"] < 1e-8
    assert 0 < rows[("float32", "exact")]["force_error"] < 1e-5
    assert 0 < rows[("float32", "spline")]["force_error"] < 1e-5
    for key in (("float64", "spline"), ("float32", "spline")):
        # layers 0 and 1, and layer 0 per edge (reassociate auto keeps both first layers)
        assert len(rows[key]["tables"]) == 3 and "intervals" in rows[key]["tables"][0]
    assert all(r["tf32"] == "auto" for r in rows.values())
    assert "| float32 | spline | auto |" in proc.stdout


def test_roofline_parses_ncu_rows_into_kernel_families():
    # bench/roofline.py's reading of `ncu --csv --page raw` (ncu itself runs on the GPU machine): units
    # converted, FFMA counted as two FLOPs, launches of one function grouped, rates and time-weighted
    # utilisations computed from the sums.
    sys.path.insert(0, os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench"))
    import roofline
    cols = ["ID", "Kernel Name", roofline.DURATION, roofline.DRAM_READ, roofline.DRAM_WRITE, roofline.FFMA,
            roofline.FADD, roofline.FMUL, roofline.SM, roofline.TENSOR]
    units = ["", "", "usecond", "Mbyte", "Kbyte", "inst", "inst", "inst", "%", "%"]
    data = [["0", "tp_forward_3", "100", "2", "500", "1,000,000", "10", "20", "80", "0"],
            ["1", "tp_forward_3", "300", "6", "1500", "3000000", "30", "60", "40", "0"],
            ["2", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n", "100", "1", "0", "0", "0", "0", "50", "70"]]
    text = "==PROF== noise\n" + "\n".join(",".join(f'"{v}"' for v in row) for row in [cols, units, *data]) + "\n"
    rows = roofline.parse_ncu_csv(text)
    assert [r["family"] for r in rows] == ["tp_forward_3", "tp_forward_3", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n"]
    assert rows[0]["seconds"] == pytest.approx(100e-6)
    assert rows[0]["dram_bytes"] == pytest.approx(2e6 + 500e3)
    assert rows[0]["fp32_flops"] == pytest.approx(2e6 + 30)
    summary = roofline.summarise(rows, fp32_peak_tflops=50.0, hbm_peak_tbps=4.0)
    tp, gemm = summary
    assert (tp["family"], tp["launches"], gemm["launches"]) == ("tp_forward_3", 2, 1)
    assert tp["ms"] == pytest.approx(0.4) and tp["share"] == pytest.approx(0.8)
    assert tp["fp32_tflops"] == pytest.approx((8e6 + 120) / 400e-6 / 1e12)
    assert tp["fp32_fraction"] == pytest.approx(tp["fp32_tflops"] / 50.0)
    assert tp["dram_tbps"] == pytest.approx(10e6 / 400e-6 / 1e12)
    assert tp["sm_pct"] == pytest.approx((80 * 100 + 40 * 300) / 400)
    assert gemm["tensor_pct"] == pytest.approx(70) and gemm["flops_per_byte"] == 0
    assert "| tp_forward_3 | 2 | 0.400 | 80.0 % |" in roofline.table(summary)
    with pytest.raises(ValueError, match="no column"):
        roofline.parse_ncu_csv('"ID","Kernel Name"\n"",""\n"0","k"\n')


def test_roofline_names_families_and_the_bench_profiles_one_step():
    # roofline.py profiles the one step flashmace-bench runs between cudaProfilerStart and Stop
    # (--profile-step; on the CPU the step runs and nothing is collected).
    sys.path.insert(0, os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench"))
    import roofline
    proc = subprocess.run([BENCH, "--model", MODEL, "--warmup", "1", "--steps", "1", "--cells", "2", "--no-breakdown",
                           "--profile-step"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "one step profiled" in proc.stderr
    assert roofline.family("void flashmace::<unnamed>::backward_kernel<float, 16>(flashmace::SpeciesOuterArgs<T1>, "
                           "const T1 *)") == "backward_kernel(SpeciesOuterArgs)"
    assert roofline.family("void native::(anonymous namespace)::CatArrayBatchedCopy<native::OpaqueType<4>, unsigned "
                           "int, 3, 64, 64>(T1 *, int)") == "CatArrayBatchedCopy(T1 *)"
    assert roofline.family("tp_backward_rows_f32") == "tp_backward_rows_f32"


def test_trace_records_the_chosen_evaluations(tmp_path):
    # FLASHMACE_TRACE=FILE:FIRST:COUNT: evaluations 2-5 of 1 warm-up + 4 timed steps, each a
    # "flashmace::evaluate" range holding the engine's ATen operators (a CPU run: no device lanes);
    # the summary leaves the first out (the profiler starts during it): two whole periods.
    sys.path.insert(0, os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench"))
    import trace_summary
    trace = tmp_path / "trace.json"
    proc = subprocess.run([BENCH, "--model", MODEL, "--warmup", "1", "--steps", "4", "--cells", "2", "--no-breakdown"],
                          capture_output=True, text=True, env=dict(os.environ, FLASHMACE_TRACE=f"{trace}:2:4"))
    assert proc.returncode == 0, proc.stderr
    assert f"trace of evaluations 2-5 written to {trace}" in proc.stderr
    assert "ERROR" not in proc.stdout + proc.stderr  # (Kineto's device query on a machine without a GPU)
    s = trace_summary.summarize(trace_summary.load_events(str(trace)), top=50, ngaps=5)
    assert (s["evaluations"], s["periods"], s["device_activity"]) == (4, 2, False)
    assert 0 < s["host_inside_evaluate_ms"] <= s["wall_ms"]
    ops = {op["name"]: op for op in s["host_ops"]}
    assert "aten::mm" in ops and ops["aten::mm"]["per_period"] >= 1  # (the radial MLP and the linears)


@pytest.mark.parametrize("value, message", [("t.json:x", "FIRST must be a positive integer"),
                                            ("t.json:0:2", "FIRST must be a positive integer"),
                                            ("t.json:3:-1", "COUNT must be a positive integer"),
                                            (":3", "no file name")])
def test_a_malformed_trace_setting_fails_at_load(tmp_path, value, message):
    proc = subprocess.run([BENCH, "--model", MODEL, "--warmup", "1", "--steps", "1", "--cells", "2"], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(os.environ, FLASHMACE_TRACE=value))
    assert proc.returncode != 0
    assert f"FLASHMACE_TRACE={value}: {message}" in proc.stderr


def test_trace_summary_measures_busy_and_idle_device_time():
    # An evaluation left out (the profiler's start), then two periods of 100 us: evaluate ranges of
    # 60 us; kernels on two streams overlapping; a copy.
    # Period 1 [0, 100): busy [10, 50) + [40, 70) + [90, 95) = 65 us, idle 35 (inside [0, 60): 10).
    # Period 2 [100, 200): busy [110, 130) = 20 us, idle 80 (inside [100, 160): 40).
    sys.path.insert(0, os.path.join(os.environ["FLASHMACE_SOURCE_DIR"], "bench"))
    import trace_summary

    def x(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}
    events = [x("user_annotation", "flashmace::evaluate", -300, 60), x("kernel", "k_start", -290, 200),
              x("gpu_user_annotation", "flashmace::evaluate", -280, 60),
              x("user_annotation", "flashmace::evaluate", 0, 60), x("user_annotation", "flashmace::evaluate", 100, 60),
              x("user_annotation", "flashmace::evaluate", 200, 60),
              x("kernel", "k_a", 10, 40), x("kernel", "k_b", 40, 30), x("gpu_memcpy", "Memcpy DtoH", 90, 5, bytes=80),
              x("kernel", "k_a", 110, 20), x("kernel", "k_late", 210, 5),
              x("cuda_runtime", "cudaStreamSynchronize", 70, 25), x("cuda_runtime", "cudaLaunchKernel", 5, 2),
              x("cpu_op", "aten::mm", 20, 10), x("cpu_op", "aten::mm", 120, 14), x("cpu_op", "aten::add", 80, 3)]
    s = trace_summary.summarize(events, top=10, ngaps=3)
    assert (s["evaluations"], s["periods"]) == (4, 2)
    assert s["wall_ms"] == pytest.approx(0.1) and s["host_inside_evaluate_ms"] == pytest.approx(0.06)
    assert s["device_busy_ms"] == pytest.approx((65 + 20) / 2e3)
    assert s["device_idle_ms"] == pytest.approx((35 + 80) / 2e3)
    assert s["device_idle_inside_evaluate_ms"] == pytest.approx((10 + 40) / 2e3)
    assert [(k["name"], k["per_period"], k["ms"]) for k in s["kernels"]] == [("k_a", 1.0, 0.03), ("k_b", 0.5, 0.015)]
    assert s["copies"] == {"per_period": 0.5, "bytes": 40.0, "ms": 0.0025}
    assert s["host_waits"] == [{"name": "cudaStreamSynchronize", "per_period": 0.5, "ms": 0.0125}]
    # aten::add ran outside the evaluate ranges: not an evaluation's operator
    assert [(o["name"], o["ms"]) for o in s["host_ops"]] == [("aten::mm", 0.012)]
    longest = s["longest_gaps"][0]
    assert (longest["us"], longest["at_us"], longest["before"], longest["after"]) == (70, 30, "k_a", "-")
    assert "device busy (all streams)" in trace_summary.render(s)
