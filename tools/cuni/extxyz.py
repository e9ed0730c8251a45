"""Extended XYZ as mace-torch (through ASE) reads it, with labels under explicit keys
(REF_energy, REF_forces, REF_stress): the default names `energy`/`forces`/`stress` collide with
the results of an ASE calculator, which ASE's reader would attach instead.

REF_stress is six numbers in ASE's Voigt order (xx yy zz yz xz xy), eV/A^3, sigma = (1/V) dE/dstrain."""
import numpy as np

ENERGY_KEY, FORCES_KEY, STRESS_KEY = "REF_energy", "REF_forces", "REF_stress"
SYMBOL = {28: "Ni", 29: "Cu"}
NUMBER = {v: k for k, v in SYMBOL.items()}


def _num(value):
    return repr(float(value))  # shortest text that reads back as the same double


def _info_value(value):
    if isinstance(value, str):
        return value
    return _num(value)


def format_frame(frame):
    lattice = " ".join(_num(v) for v in frame.cell.ravel())
    header = [f'Lattice="{lattice}"', f"Properties=species:S:1:pos:R:3:{FORCES_KEY}:R:3",
              f"{ENERGY_KEY}={_num(frame.energy)}",
              f'{STRESS_KEY}="{" ".join(_num(v) for v in frame.stress)}"',
              f"config_type={frame.kind}"]
    header += [f"{k}={_info_value(v)}" for k, v in sorted(frame.info.items())]
    header.append('pbc="T T T"')
    lines = [str(len(frame.species)), " ".join(header)]
    lines += [" ".join([SYMBOL[int(z)], *(_num(v) for v in p), *(_num(v) for v in f)])
              for z, p, f in zip(frame.species, frame.positions, frame.forces)]
    return "\n".join(lines) + "\n"


def write(path, frames):
    with open(path, "w") as f:
        for frame in frames:
            f.write(format_frame(frame))


def read(path):
    """The configurations of a file written by write(): a list of dicts with numpy arrays
    (species, positions, forces, cell, stress) and floats/strings from the header. A small reader
    for this module's own output (tests, evaluation), not a general extended-XYZ parser."""
    out = []
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        n = int(lines[i])
        header = _parse_header(lines[i + 1])
        rows = [line.split() for line in lines[i + 2:i + 2 + n]]
        conf = dict(header)
        conf["species"] = np.array([NUMBER[r[0]] for r in rows])
        values = np.array([[float(v) for v in r[1:7]] for r in rows])
        conf["positions"], conf["forces"] = values[:, :3], values[:, 3:]
        conf["cell"] = np.array(header["Lattice"].split(), dtype=float).reshape(3, 3)
        conf["stress"] = np.array(header[STRESS_KEY].split(), dtype=float)
        conf["energy"] = float(header[ENERGY_KEY])
        out.append(conf)
        i += 2 + n
    return out


def _parse_header(text):
    fields, key, i = {}, "", 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        eq = text.index("=", i)
        key = text[i:eq]
        if text[eq + 1] == '"':
            end = text.index('"', eq + 2)
            fields[key] = text[eq + 2:end]
        else:
            end = text.find(" ", eq)
            end = len(text) if end < 0 else end
            fields[key] = text[eq + 1:end]
        i = end + 1
    return fields
