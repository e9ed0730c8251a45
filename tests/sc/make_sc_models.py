"""CTest fixture: random-weight MACE models (tools/make_random_model.py) for the SC tests.

Writes OUT_DIR/<name>.safetensors (float64) for the make_random_model presets below and for small
models that cover correlation 1-3 (also per layer), output irreps up to L = 2, channel counts that are
not a multiple of the CPU executor's tile, and several elements."""
import os
import sys

import make_random_model

SMALL = dict(r_max=4.0, radial_mlp=[8], num_bessel=4, mlp_irreps="4x0e", avg_num_neighbors=8.0)
make_random_model.PRESETS.update({
    "sc-corr1-l2": dict(hidden="4x0e+4x1o+4x2e", max_ell=2, correlation=1, elements=[1, 8], **SMALL),
    "sc-corr2-l2": dict(hidden="6x0e+6x1o+6x2e", max_ell=3, correlation=2, elements=[1, 6, 8], **SMALL),
    "sc-corr3-l2": dict(hidden="5x0e+5x1o+5x2e", max_ell=2, correlation=3, elements=[14, 26], **SMALL),
    "sc-mixed-l1": dict(hidden="17x0e+17x1o", max_ell=3, correlation=[3, 1], elements=[3, 9, 11, 17], **SMALL),
})
MODELS = ["tiny-cuni", "mp0-small", "mp0-medium", "sc-corr1-l2", "sc-corr2-l2", "sc-corr3-l2", "sc-mixed-l1"]

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
missing = [name for name in MODELS if not os.path.exists(os.path.join(out_dir, f"{name}.safetensors"))]
if missing:
    try:
        import mace  # noqa: F401
    except ImportError:
        sys.exit(f"make_sc_models.py: mace-torch is not installed here, so {', '.join(missing)} cannot be made; "
                 f"run tools/install_deps.sh, or copy them into {out_dir} from a machine that has it")
for name in missing:
    path = os.path.join(out_dir, f"{name}.safetensors")
    make_random_model.main([name, path + ".tmp", "--seed", "7"])
    os.replace(path + ".tmp", path)
