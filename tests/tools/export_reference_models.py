"""CTest fixture: export every shared reference model with the exporter core (float64 and float32)."""
import glob
import os
import sys

import export_mace

ref_dir, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
cases = sorted(glob.glob(os.path.join(ref_dir, "mace_*.safetensors")))
if not cases:
    sys.exit(f"no mace_*.safetensors in {ref_dir}")
for path in cases:
    name = os.path.basename(path)[len("mace_"):-len(".safetensors")]
    export_mace.export_reference(path, os.path.join(out_dir, f"{name}.safetensors"))
    export_mace.export_reference(path, os.path.join(out_dir, f"{name}_f32.safetensors"), dtype="float32")
    print("exported", name)
