// modelc-run: run, inspect or compare with the runtime only (see RunCli.h).
#include "tools/runcli/RunCli.h"

int main(int argc, char **argv) { return mc::cli::runMain(argc, argv); }
