// The `modelc` command line: subcommand dispatch and `modelc compile`.
#ifndef MODELC_TOOLS_DRIVER_H
#define MODELC_TOOLS_DRIVER_H

namespace mc::tools {
/// Returns the process exit code: 0 on success, 1 on any error (which is
/// printed to stderr), never aborting on bad input.
int modelcMain(int argc, char** argv);
int compileMain(int argc, char** argv);
/// `modelc import IN.onnx -o OUT.mlir`.
int importMain(int argc, char** argv);
} // namespace mc::tools

#endif // MODELC_TOOLS_DRIVER_H
