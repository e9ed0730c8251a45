"""tools/make_water_box.py (a periodic water box for flashmace-bench --xyz): the molecules are rigid
H2O with the right bond length and angle under the minimum image, the box has the requested density,
no two molecules come closer than 1.5 A, the file is deterministic per seed, and flashmace-bench
evaluates it with a model that has H and O."""
import json
import os
import subprocess
import sys

import numpy as np

SOURCE = os.environ["FLASHMACE_SOURCE_DIR"]
SCRIPT = os.path.join(SOURCE, "tools", "make_water_box.py")
BENCH = os.environ["FLASHMACE_BENCH"]
SCALAR_L0 = os.path.join(os.environ["FLASHMACE_EXPORTED_MODEL_DIR"], "scalar_l0.safetensors")  # H C O


def read(path):
    lines = open(path).read().splitlines()
    side = float(lines[1].split('"')[1].split()[0])
    rows = [line.split() for line in lines[2:2 + int(lines[0])]]
    return [r[0] for r in rows], np.array([[float(v) for v in r[1:4]] for r in rows]), side


def test_molecules_density_and_contacts(tmp_path):
    out = tmp_path / "water.xyz"
    subprocess.run([sys.executable, SCRIPT, str(out), "--molecules", "60", "--seed", "3"], check=True)
    symbols, x, side = read(out)
    assert len(symbols) == 3 * 64 and symbols[:3] == ["O", "H", "H"]  # rounded up to 4^3 molecules
    assert abs(64 * 18.01528 / 6.02214076e23 / (side * 1e-8) ** 3 - 1.0) < 1e-9  # g/cm^3

    def vector(i, j):
        d = x[j] - x[i]
        return d - side * np.round(d / side)

    for m in range(64):
        o, h1, h2 = 3 * m, 3 * m + 1, 3 * m + 2
        a, b = vector(o, h1), vector(o, h2)
        assert np.allclose([np.linalg.norm(a), np.linalg.norm(b)], 0.9572, atol=1e-9)
        angle = np.degrees(np.arccos(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
        assert abs(angle - 104.52) < 1e-6
    d = x[:, None, :] - x[None, :, :]
    d -= side * np.round(d / side)
    r = np.sqrt((d * d).sum(-1))
    molecule = np.arange(len(x)) // 3
    assert r[molecule[:, None] != molecule[None, :]].min() >= 1.5
    again = tmp_path / "again.xyz"
    subprocess.run([sys.executable, SCRIPT, str(again), "--molecules", "60", "--seed", "3"], check=True)
    assert again.read_text() == out.read_text()


def test_bench_runs_the_water_box(tmp_path):
    box = tmp_path / "water.xyz"
    subprocess.run([sys.executable, SCRIPT, str(box), "--molecules", "27"], check=True)
    report = tmp_path / "bench.json"
    subprocess.run([BENCH, "--model", SCALAR_L0, "--xyz", str(box), "--warmup", "1", "--steps", "1",
                    "--no-breakdown", "--json", str(report)], check=True, capture_output=True)
    r = json.loads(report.read_text())["result"]
    assert r["atoms"] == 81 and r["edges"] > 81 * 10 and np.isfinite(r["energy"])
