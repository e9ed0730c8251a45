#!/usr/bin/env python3
"""The house rules of docs/architecture.md, checked on the source tree (no build needed).

  1. src/engine/kernels and src/core, src/sc, src/jit are torch-free: no ATen, c10 or torch header.
  2. src/engine/ops never includes src/engine/step, nor the public face above it.
  3. The front ends (src/lammps, kokkos, tools/cli, python) include of the engine only its public face:
     engine/<file>.h, never engine/ops, engine/step, engine/kernels, model/ or sc/ headers.
  4. Rooms include only downwards: core <- jit <- sc <- kernels; core <- model <- ops <- step <- face.
  5. No function in src/ is longer than MAX_FUNCTION_LINES lines.
Prints every violation with its file and line; exits 1 if there is any.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # (--root: another tree, for the script's own test)
MAX_FUNCTION_LINES = 120
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
TORCH = re.compile(r"^(ATen|c10|torch)/")

# room -> the rooms (include prefixes) it may include from the project
ROOMS = {
    "src/core": ["core/"],
    "src/jit": ["core/", "jit/"],
    "src/sc": ["core/", "jit/", "sc/"],
    "src/engine/kernels": ["core/", "jit/", "sc/", "engine/kernels/"],
    "src/model": ["core/", "model/"],
    "src/engine/ops": ["core/", "jit/", "sc/", "model/", "engine/kernels/", "engine/ops/"],
    "src/engine/step": ["core/", "jit/", "sc/", "model/", "engine/kernels/", "engine/ops/", "engine/step/",
                        "engine/engine_options.h", "engine/evaluator.h"],
    "src/engine": ["core/", "sc/sc_executor_kind.h", "model/", "engine/"],
}
TORCH_FREE = ["src/core", "src/jit", "src/sc", "src/engine/kernels"]
FRONT_ENDS = ["src/lammps", "kokkos", "tools/cli", "python"]
PUBLIC_FACE = re.compile(r"^(core/[a-z_0-9]+\.h|engine/[a-z_0-9]+\.h)$")
SOURCES = (".h", ".cpp", ".cu")


def room_of(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    best = ""
    for room in ROOMS:
        if rel.startswith(room + "/") and len(room) > len(best):
            best = room
    return best


def project_header(name: str) -> bool:
    return name.split("/")[0] in ("core", "jit", "sc", "model", "engine")


def check_includes(path: Path, errors: list) -> None:
    rel = path.relative_to(ROOT).as_posix()
    room = room_of(path)
    front_end = any(rel.startswith(f + "/") for f in FRONT_ENDS)
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        name = m.group(1)
        where = f"{rel}:{number}: includes {name}"
        if any(rel.startswith(r + "/") for r in TORCH_FREE) and TORCH.match(name):
            errors.append(f"{where}: {room} is torch-free")
        if front_end and project_header(name) and not PUBLIC_FACE.match(name):
            errors.append(f"{where}: a front end includes only the engine's public face (engine/*.h, core/*.h)")
        if room and project_header(name) and not any(name.startswith(p) for p in ROOMS[room]):
            errors.append(f"{where}: {room} may include only {', '.join(ROOMS[room])}")


def functions(text: str):
    """(name, first line, line count) of each function body at namespace or class level (a brace
    block whose opening line ends a parameter list), found by brace matching outside comments and
    string literals."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    code = re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', lambda m: " " * len(m.group(0)), code)
    depth, stack = 0, []
    line = 1
    head = ""
    for ch in code:
        if ch == "\n":
            line += 1
        if ch == "{":
            signature = head.strip()
            is_function = bool(re.search(r"\)\s*(const|override|noexcept|final|mutable|\s)*(->[^{;]*)?(:[^;{}]*)?$",
                                         signature)) and not re.search(r"\b(if|for|while|switch|catch)\s*\(", signature[-200:].split(";")[-1])
            stack.append((line, is_function, signature[-80:]))
            depth += 1
            head = ""
        elif ch == "}":
            depth -= 1
            if stack:
                start, is_function, signature = stack.pop()
                # outermost function bodies only (lambdas and blocks inside count towards them)
                if is_function and not any(f for _, f, _ in stack):
                    yield signature, start, line - start + 1
            head = ""
        elif ch == ";":
            head = ""
        else:
            head += ch


def check_function_lengths(path: Path, errors: list) -> None:
    rel = path.relative_to(ROOT).as_posix()
    for signature, start, count in functions(path.read_text()):
        if count > MAX_FUNCTION_LINES:
            name = re.findall(r"([~\w:]+)\s*\(", signature)
            errors.append(f"{rel}:{start}: function {name[0] if name else repr(signature)} has {count} lines "
                          f"(at most {MAX_FUNCTION_LINES}): split it")


def main() -> int:
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the source tree (default: this checkout)")
    ROOT = parser.parse_args().root.resolve()
    errors: list = []
    for base in ["src", "kokkos", "tools/cli", "python"]:
        for path in sorted((ROOT / base).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            check_includes(path, errors)
            if base == "src":
                check_function_lengths(path, errors)
    for e in errors:
        print(e)
    print(f"check_layout: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
