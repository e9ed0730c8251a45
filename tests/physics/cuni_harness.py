"""What the Cu-Ni tests share: the executables and files they need (a missing one fails the test
with what to install; it never skips), and running LAMMPS decks.

FLASHMACE_LMP      flashmace-lmp: Debian's LAMMPS library with pair_style mace/flash built in
                   (it has eam/alloy too, so both potentials run in the same program)
FLASHMACE_EAM_LMP  Debian's `lmp`, what tools/make_cuni_data.py labels the data with
FLASHMACE_EAM_FILE the Cu-Ni EAM potential (default: Debian lammps-data's CuNi.eam.alloy)"""
import os
import subprocess
import sys

SOURCE = os.environ.get("FLASHMACE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(SOURCE, "tools")
EAM_FILE = os.environ.get("FLASHMACE_EAM_FILE", "/usr/share/lammps/potentials/CuNi.eam.alloy")


def required_file(variable, what, default=""):
    path = os.environ.get(variable, default)
    assert path and os.path.isfile(path), (
        f"{variable}={path!r}: {what} not found. The Cu-Ni tests need it and do not skip without it.")
    return path


def flashmace_lmp():
    return required_file("FLASHMACE_LMP", "flashmace-lmp (configure flashmace with LAMMPS: Debian liblammps-dev)")


def eam_lmp():
    return required_file("FLASHMACE_EAM_LMP", "LAMMPS executable `lmp` (Debian package lammps)")


def eam_file():
    assert os.path.isfile(EAM_FILE), f"{EAM_FILE} not found (Debian package lammps-data)"
    return EAM_FILE


def run_lammps(exe, workdir, deck, timeout=900):
    """Runs `deck` (text) serially with one thread; returns the screen output."""
    path = os.path.join(workdir, "in.deck")
    with open(path, "w") as f:
        f.write(deck)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([exe, "-in", path, "-log", "none", "-echo", "none", "-nocite"], cwd=workdir,
                          capture_output=True, text=True, timeout=timeout, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "ERROR" not in output, f"{exe} -in {path}\n{output[-4000:]}"
    return output


def printed(output, tag):
    """The numbers of every `print "TAG ..."` line, in order."""
    return [[float(w) for w in line.split()[1:]] for line in output.splitlines() if line.startswith(tag + " ")]


def run_tool(script, *args, timeout=1800):
    """Runs tools/SCRIPT with this interpreter; returns stdout+stderr, asserting success."""
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, script), *args], capture_output=True, text=True,
                          timeout=timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} {' '.join(args)} failed:\n{output[-6000:]}"
    return output
