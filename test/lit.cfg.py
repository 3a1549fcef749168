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
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))

# The CUDA toolkit's ptxas (the cuda target assembles its PTX with it): CI
# has it in /usr/local/cuda; elsewhere the cuda-target tests are reported
# UNSUPPORTED, visibly.
cuda = os.environ.get("MODELC_CUDA_PATH", "/usr/local/cuda")
if os.access(os.path.join(cuda, "bin", "ptxas"), os.X_OK):
    config.available_features.add("ptxas")
    config.substitutions.append(("%cuda", cuda))

# The lavapipe harness (built when Vulkan and SPIRV-Tools are found; CI has
# them from scripts/setup).
if os.path.exists(os.path.join(config.modelc_tools_dir, "modelc-kernel-check")):
    config.available_features.add("lavapipe")
    config.environment["VK_ICD_FILENAMES"] = \
        "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
