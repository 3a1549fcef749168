// modelc: the compiler driver (compile), plus the runtime's run, inspect and
// compare commands so one binary does the whole job.
#include "tools/modelc/Driver.h"

int main(int argc, char** argv) { return mc::tools::modelcMain(argc, argv); }
