# lit configuration for modelc's suites: test/ir, test/passes, test/codegen,
# test/tools. Each RUN line uses modelc-opt / modelc / modelc-run from the
# build and FileCheck / not from LLVM.
import os
import lit.formats

config.name = "modelc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.modelc_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt",
                   "Inputs", "runtime", "unit"]

path = os.pathsep.join([config.modelc_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
config.substitutions.append(("%modelc_src", config.modelc_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%modelc_bin", config.modelc_tools_dir))
config.substitutions.append(("%modelc_lib",
                             os.path.join(config.modelc_obj_root, "lib")))

# Optional Python reference packages, as lit features (REQUIRES: sklearn).
import subprocess
for module in ["sklearn", "torch"]:
    try:
        if subprocess.run([config.python_executable, "-c", "import " + module],
                          capture_output=True, timeout=60).returncode == 0:
            config.available_features.add(module)
    except (OSError, subprocess.SubprocessError):
        pass

# OpenMPI's launcher, for the data-parallel tests (REQUIRES: mpi). As root
# (CI), mpirun needs --allow-run-as-root; --oversubscribe lets 2 ranks run
# on any number of cores.
import shutil
# In a sanitizer build, the ranks run without leak checks: OpenMPI leaks from
# its components, unloaded before LeakSanitizer reports, so no suppression
# can name them (test/runtime/CMakeLists.txt, runtime.mpi).
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", ("env LSAN_OPTIONS=detect_leaks=0 "
                     if config.modelc_sanitized else "") +
         "mpirun --allow-run-as-root --oversubscribe"))

# The CUDA toolkit's ptxas (the cuda target assembles its PTX with it): CI
# has it in /usr/local/cuda; elsewhere the cuda-target tests are reported
# UNSUPPORTED, visibly.
cuda = os.environ.get("MODELC_CUDA_PATH", "/usr/local/cuda")
if os.access(os.path.join(cuda, "bin", "ptxas"), os.X_OK):
    config.available_features.add("ptxas")
    config.substitutions.append(("%cuda", cuda))

# Graphviz's dot, to check that `modelc compile --emit=dot` writes a file it
# reads (scripts/setup installs it).
if shutil.which("dot"):
    config.available_features.add("graphviz")

# The lavapipe harness (built when Vulkan and SPIRV-Tools are found; CI has
# them from scripts/setup).
if os.path.exists(os.path.join(config.modelc_tools_dir, "modelc-kernel-check")):
    config.available_features.add("lavapipe")
    config.environment["VK_ICD_FILENAMES"] = \
        "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
# %lavapipe-env before modelc-kernel-check: in a sanitizer build, no leak
# checks (Mesa leaks from code unloaded before LeakSanitizer reports, which
# no suppression can name; test/gpu/CMakeLists.txt).
config.substitutions.append(
    ("%lavapipe-env",
     "env LSAN_OPTIONS=detect_leaks=0" if config.modelc_sanitized else ""))
