"""The house-rules check of docs/architecture.md (.ci/check_layout.py): this checkout passes it, and
a tree that breaks each rule is refused with a message naming the file, the line and the rule."""
import os
import subprocess
import sys

SOURCE = os.environ.get("FLASHMACE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, ".ci", "check_layout.py")


def run(root):
    return subprocess.run([sys.executable, SCRIPT, "--root", str(root)], capture_output=True, text=True)


def test_this_checkout_keeps_the_rules():
    proc = run(SOURCE)
    assert proc.returncode == 0, proc.stdout
    assert "check_layout: 0 violation(s)" in proc.stdout


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_each_broken_rule_is_named(tmp_path):
    write(tmp_path, "src/engine/kernels/k.h", '#pragma once\n#include <ATen/ATen.h>\n')
    write(tmp_path, "src/engine/ops/o.cpp", '#include "engine/step/fast_engine.h"\n')
    write(tmp_path, "src/core/c.cpp", '#include "model/mace_params.h"\n')
    write(tmp_path, "kokkos/p.cpp", '#include "engine/step/memory_plan.h"\n#include "engine/evaluator.h"\n')
    write(tmp_path, "tools/cli/t.cpp", '#include "model/device.h"\n')
    body = "".join(f"  x += {i};\n" for i in range(125))
    write(tmp_path, "src/engine/step/long.cpp", "int f(int x) {\n" + body + "  return x;\n}\n"
          "int g(int x) {\n  return x;\n}\n")
    proc = run(tmp_path)
    assert proc.returncode == 1
    out = proc.stdout
    assert "src/engine/kernels/k.h:2: includes ATen/ATen.h: src/engine/kernels is torch-free" in out
    assert "src/engine/ops/o.cpp:1: includes engine/step/fast_engine.h: src/engine/ops may include only" in out
    assert "src/core/c.cpp:1: includes model/mace_params.h: src/core may include only core/" in out
    assert "kokkos/p.cpp:1: includes engine/step/memory_plan.h: a front end includes only the engine's public face" in out
    assert "kokkos/p.cpp:2" not in out
    assert "tools/cli/t.cpp:1: includes model/device.h: a front end" in out
    assert "src/engine/step/long.cpp:1: function f has 128 lines (at most 120): split it" in out
    assert "function g" not in out
    assert "check_layout: 6 violation(s)" in out
