// The MLIR-free command-line front ends of the runtime: run an artifact,
// inspect one, compare two .npy files. modelc-run is a trivial main over
// runMain; the compiler's `modelc run|inspect|compare` forward to these.
//
// argv[0] is the name used in messages ("modelc-run", "modelc compare"), so
// errors read `<argv[0]>: error: ...`. Each returns the process exit code (0
// ok, 1 any error) and never throws.
#ifndef MODELC_TOOLS_RUNCLI_RUNCLI_H
#define MODELC_TOOLS_RUNCLI_RUNCLI_H

#include <string>
#include <vector>

namespace mc::rt {
class Model;
}

namespace mc::cli {

/// `MODEL.mcpk --input NAME=FILE.npy ... [--output-dir DIR] [--bench N]`,
/// also `--inspect MODEL.mcpk`, `--compare A.npy B.npy [--rtol X]` and
/// `--train MODEL.mcpk ...` (trainMain).
int runMain(int argc, char **argv);
/// `MODEL.mcpk`: producer, versions, signature, arena, steps, weights.
int inspectMain(int argc, char **argv);
/// `--train MODEL.mcpk --data NAME=FILE.npy ... --batch B --epochs E
/// [--checkpoint DIR] [--checkpoint-every N] [--resume] [--shuffle SEED]
/// [--log-csv FILE] [--plot FILE.svg] [--quiet]`: runs a compiled training
/// step over a dataset (Train.cpp; docs/runtime.md).
int trainMain(int argc, char **argv);
/// `A.npy B.npy [--rtol X]`: ||a-b||/||b|| and max |a-b|; exit 1 when the
/// dtypes or shapes differ, on any NaN, or when the relative error > rtol
/// (default 1e-5).
int compareMain(int argc, char **argv);

/// The file name an output called `name` gets inside the output directory:
/// only [A-Za-z0-9._-], never empty, never starting with '.', so it cannot
/// leave the directory or hide.
std::string sanitizeOutputName(const std::string &name);

/// The artifact's targets (Model.targets): what --device auto must run.
std::vector<std::string> artifactTargets(const rt::Model &model);

} // namespace mc::cli

#endif // MODELC_TOOLS_RUNCLI_RUNCLI_H
