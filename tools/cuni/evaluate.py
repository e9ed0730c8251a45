"""Held-out errors of a trained model against the EAM labels: energy RMSE per atom and force
RMSE per Cartesian component (the numbers issue 13 sets limits on), overall and by config_type."""
import numpy as np

from . import extxyz


def predict(model_path, configs, device="cpu", dtype="float64"):
    """[(energy, forces)] from mace-torch's calculator on the given configurations."""
    from ase import Atoms
    from mace.calculators import MACECalculator

    calc = MACECalculator(model_paths=model_path, device=device, default_dtype=dtype)
    out = []
    for c in configs:
        atoms = Atoms(numbers=c["species"], positions=c["positions"], cell=c["cell"], pbc=True)
        atoms.calc = calc
        out.append((float(atoms.get_potential_energy()), np.array(atoms.get_forces())))
    return out


def errors(configs, predictions):
    """{"all": {...}, kind: {...}}: energy RMSE in meV/atom, force RMSE in meV/A, counts."""
    groups = {"all": list(range(len(configs)))}
    for i, c in enumerate(configs):
        groups.setdefault(c["config_type"], []).append(i)
    out = {}
    for name, idx in groups.items():
        de = [(predictions[i][0] - configs[i]["energy"]) / len(configs[i]["species"]) for i in idx]
        df = np.concatenate([(predictions[i][1] - configs[i]["forces"]).ravel() for i in idx])
        out[name] = {"configurations": len(idx),
                     "energy_rmse_meV_per_atom": 1000 * float(np.sqrt(np.mean(np.square(de)))),
                     "force_rmse_meV_per_A": 1000 * float(np.sqrt(np.mean(np.square(df))))}
    return out


def evaluate(model_path, test_file, device="cpu", dtype="float64"):
    configs = extxyz.read(test_file)
    return errors(configs, predict(model_path, configs, device, dtype))


def format_table(table):
    lines = [f"{'set':<16}{'configs':>8}{'E RMSE meV/atom':>18}{'F RMSE meV/A':>15}"]
    for name, e in table.items():
        lines.append(f"{name:<16}{e['configurations']:>8}{e['energy_rmse_meV_per_atom']:>18.2f}"
                     f"{e['force_rmse_meV_per_A']:>15.1f}")
    return "\n".join(lines)
