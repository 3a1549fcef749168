// A main for the fuzz targets in the ordinary (gcc, unsanitized) build:
// runs each file given, or each file in each directory given, through the
// target's LLVMFuzzerTestOneInput once, as libFuzzer would replay a corpus.
// CTest runs the seed corpora this way on every change (fuzz.replay.*), so
// a seed that crashes fails CI without the clang build; and the replay
// binaries run under valgrind, which sees memory errors in the prebuilt
// MLIR and LLVM libraries that ASan (compile-time instrumentation) cannot.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto &entry : fs::directory_iterator(p))
        if (entry.is_regular_file())
          files.push_back(entry.path());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: '%s' is neither a file nor a directory\n",
                   argv[0], argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path &p : files) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read '%s'\n", argv[0], p.c_str());
      return 2;
    }
    // A copy of exactly the file's size, as libFuzzer passes it, so an
    // overread is a read past the end of a heap block.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("%zu inputs ran\n", files.size());
  return 0;
}
