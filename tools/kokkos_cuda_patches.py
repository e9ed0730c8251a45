#!/usr/bin/env python3
"""Source edits that let Kokkos 3.4.01 (pykokkos-base 0.0.7's external/kokkos) build for and run on an
H200 (sm_90) with nvcc 13 (CUDA 13). tools/build_kokkos_lammps.sh (FLASHMACE_KOKKOS_BACKEND=cuda)
applies them to the freshly unpacked sdist; nothing of Kokkos enters the repository.
  tools/kokkos_cuda_patches.py KOKKOS_SOURCE_DIR
LAMMPS 20220106's KOKKOS sources (the styles that build keeps) compile with nvcc 13 unchanged.
Each edit replaces an exact text that must occur exactly the stated number of times; all are checked
before any file is written, so a different Kokkos stops the build with the file and the text looked
for instead of building something half-patched.
"""
import os
import pathlib
import sys

# (file, text, replacement, occurrences, why)
KOKKOS = [
    ("bin/nvcc_wrapper", 'default_arch="sm_35"\n', 'default_arch="sm_90"\n', 1,
     "CUDA 13 dropped sm_35; the wrapper's default arch is what CMake's compiler probe (no -arch) "
     "compiles for"),
    ("cmake/kokkos_arch.cmake",
     'KOKKOS_ARCH_OPTION(AMPERE86        GPU  "NVIDIA Ampere generation CC 8.6")\n',
     'KOKKOS_ARCH_OPTION(AMPERE86        GPU  "NVIDIA Ampere generation CC 8.6")\n'
     'KOKKOS_ARCH_OPTION(HOPPER90        GPU  "NVIDIA Hopper generation CC 9.0")\n', 1,
     "Kokkos 3.4 has no Hopper arch; an sm_80 build aborts in Kokkos::initialize on an sm_90 device"),
    ("cmake/kokkos_arch.cmake", "CHECK_CUDA_ARCH(AMPERE86  sm_86)\n",
     "CHECK_CUDA_ARCH(AMPERE86  sm_86)\nCHECK_CUDA_ARCH(HOPPER90  sm_90)\n", 1,
     "Kokkos_ARCH_HOPPER90 -> -arch=sm_90"),
    ("cmake/kokkos_arch.cmake",
     "  IF (KOKKOS_ARCH_AMPERE80 OR KOKKOS_ARCH_AMPERE86)\n    SET(KOKKOS_ARCH_AMPERE ON)\n  ENDIF()\n",
     "  IF (KOKKOS_ARCH_AMPERE80 OR KOKKOS_ARCH_AMPERE86)\n    SET(KOKKOS_ARCH_AMPERE ON)\n  ENDIF()\n\n"
     "  IF (KOKKOS_ARCH_HOPPER90)\n    SET(KOKKOS_ARCH_HOPPER ON)\n  ENDIF()\n", 1,
     "the generation name, as for the other NVIDIA archs"),
    ("cmake/KokkosCore_config.h.in", "#cmakedefine KOKKOS_ARCH_AMPERE86\n",
     "#cmakedefine KOKKOS_ARCH_AMPERE86\n#cmakedefine KOKKOS_ARCH_HOPPER\n#cmakedefine KOKKOS_ARCH_HOPPER90\n", 1,
     "KOKKOS_ARCH_HOPPER90 in KokkosCore_config.h"),
    ("core/src/Cuda/Kokkos_Cuda_Half.hpp", "  return __half2double(val);\n",
     "  return static_cast<T>(__half2float(half_t::impl_type(val)));\n", 1,
     "CUDA 13's cuda_fp16.h has no __half2double"),
] + [
    # Kokkos's CUDA >= 11.1 branch of cast_from_half hands half_t to the intrinsics, relying on an
    # implicit conversion to __half that CUDA 13's overloads no longer find (half_t's operator is
    # explicit); its CUDA < 11.1 branch already converts explicitly, as here.
    ("core/src/Cuda/Kokkos_Cuda_Half.hpp", f"  return __half2{to}(val);\n",
     f"  return __half2{to}(half_t::impl_type(val));\n", 1,
     f"CUDA 13: no implicit half_t -> __half conversion for __half2{to}")
    for to in ("float", "short_rz", "ushort_rz", "int_rz", "uint_rz", "ll_rz", "ull_rz")
] + [
    ("core/src/Cuda/Kokkos_CudaSpace.cpp",
     "    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, space.cuda_device(),\n"
     "                                        space.cuda_stream()));\n",
     "#if CUDART_VERSION >= 13000\n"
     "    cudaMemLocation location = {};\n"
     "    location.type            = cudaMemLocationTypeDevice;\n"
     "    location.id              = space.cuda_device();\n"
     "    CUDA_SAFE_CALL(\n"
     "        cudaMemPrefetchAsync(ptr, bytes, location, 0, space.cuda_stream()));\n"
     "#else\n"
     "    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, space.cuda_device(),\n"
     "                                        space.cuda_stream()));\n"
     "#endif\n", 1,
     "CUDA 13's cudaMemPrefetchAsync takes a cudaMemLocation and flags instead of a device id"),
    ("core/src/Cuda/Kokkos_Cuda_Graph_Impl.hpp",
     "    CUDA_SAFE_CALL(\n        cudaGraphAddDependencies(m_graph, &pred_cuda_node, &cuda_node, 1));\n",
     "#if CUDART_VERSION >= 13000\n"
     "    CUDA_SAFE_CALL(cudaGraphAddDependencies(m_graph, &pred_cuda_node,\n"
     "                                            &cuda_node, nullptr, 1));\n"
     "#else\n"
     "    CUDA_SAFE_CALL(\n        cudaGraphAddDependencies(m_graph, &pred_cuda_node, &cuda_node, 1));\n"
     "#endif\n", 1,
     "CUDA 13's cudaGraphAddDependencies takes edge data (none: nullptr) before the count"),
    ("core/src/Cuda/Kokkos_Cuda_BlockSize_Deduction.hpp", "      case 86: return 8;\n",
     "      case 86:\n      case 90: return 8;\n", 1,
     "the L1-preferring shared memory carveout of CC 9.0 (8 KiB, as 7.0-8.6): unknown, Kokkos throws "
     "\"Unknown device\" when a policy asks for an occupancy"),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: kokkos_cuda_patches.py KOKKOS_SOURCE_DIR")
    root = pathlib.Path(sys.argv[1])
    edits = KOKKOS
    # Check every edit against the sources before writing any: a mismatch leaves the tree untouched.
    texts = {}
    for name, old, new, count, why in edits:
        path = root / name
        if name not in texts:
            if not path.is_file():
                sys.exit(f"kokkos_cuda_patches: {path} not found (patch: {why})")
            texts[name] = path.read_text()
        found = texts[name].count(old)
        if found != count:
            sys.exit(f"kokkos_cuda_patches: {path}: expected {count} occurrence(s) of {old!r}, found {found} "
                     f"(patch: {why})")
        texts[name] = texts[name].replace(old, new)
    for name, text in texts.items():
        path = root / name
        stat = path.stat()
        path.write_text(text)
        # Keep the unpacked file's time: ccache keys the compiler (nvcc_wrapper) by its time and size,
        # so a patched wrapper stamped `now` would miss the cache on every build.
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    print(f"kokkos_cuda_patches: {len(edits)} edits in {len(texts)} files of {root}")


if __name__ == "__main__":
    main()
