// modelc/fileio.h: inputs that are not regular files are refused before
// they block or are read; outputs are written whole or not at all (issue 12
// items 4, 5 and 7).
#include "modelc/checkpoint.h"
#include "modelc/fileio.h"
#include "modelc/model.h"
#include "modelc/npy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mc::rt;

namespace {

/// A fresh directory under the test's temporary folder.
std::string freshDir(const char *name) {
  std::string dir = ::testing::TempDir() + "modelc-fileio-" + name + "-" +
                    std::to_string(::getpid());
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = ::opendir(dir.c_str());
  while (dirent *e = d ? ::readdir(d) : nullptr)
    if (e->d_name[0] != '.')
      names.push_back(e->d_name);
  if (d)
    ::closedir(d);
  return names;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

// A FIFO with no writer: every reader refuses it at once (opening it for
// reading used to block forever), naming the file.
TEST(FileIO, FifoInputsAreRefusedWithoutBlocking) {
  std::string dir = freshDir("fifo");
  std::string fifo = dir + "/in.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> bytes;
  Status st = readRegularFile(fifo, kMaxInputFileBytes, &bytes);
  EXPECT_EQ(st.message(), fifo + ": not a regular file (a FIFO); modelc "
                                 "reads only regular files");
  NpyArray arr;
  EXPECT_TRUE(contains(readNpy(fifo, &arr).message(), "(a FIFO)"));
  Checkpoint ckpt; // what --resume reads
  EXPECT_TRUE(contains(readCheckpointFile(fifo, &ckpt).message(), "(a FIFO)"));
  std::unique_ptr<Model> model;
  EXPECT_TRUE(contains(Model::loadFile(fifo, &model).message(), "(a FIFO)"));
  EXPECT_TRUE(contains(checkRegularFile(fifo, 100).message(), "(a FIFO)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(FileIO, DevicesDirectoriesAndOversizedFilesAreRefused) {
  std::vector<uint8_t> bytes;
  EXPECT_EQ(readRegularFile("/dev/zero", kMaxInputFileBytes, &bytes).message(),
            "/dev/zero: not a regular file (a character device); modelc "
            "reads only regular files");
  std::string dir = freshDir("limits");
  EXPECT_TRUE(contains(readRegularFile(dir, 100, &bytes).message(),
                       "(a directory)"));
  std::string f = dir + "/ten";
  std::ofstream(f) << "0123456789";
  EXPECT_EQ(readRegularFile(f, 9, &bytes).message(),
            f + ": the file has 10 bytes, more than the limit of 9");
  ASSERT_TRUE(readRegularFile(f, 10, &bytes));
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "0123456789");
}

// The artifact loader reads 12 bytes of a file of another kind, not all of
// it: a 1 GiB sparse file of zeros is refused at once, by its identifier.
TEST(FileIO, ArtifactIdentifierIsCheckedBeforeReadingEverything) {
  std::string dir = freshDir("ident");
  std::string f = dir + "/zeros.mcpk";
  std::ofstream(f).close();
  ASSERT_EQ(::truncate(f.c_str(), off_t(1) << 30), 0);
  std::unique_ptr<Model> model;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Model::loadFile(f, &model).message(),
            f + ": not a modelc artifact: file identifier is "
                "'\\x00\\x00\\x00\\x00', expected 'MCPK'");
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
}

TEST(FileIO, AtomicWriteReplacesWholeFile) {
  std::string dir = freshDir("atomic");
  std::string f = dir + "/out.bin";
  std::ofstream(f) << "old contents";
  ASSERT_TRUE(writeFileAtomically(f, "new", 3));
  EXPECT_EQ(slurp(f), "new");
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask); // not mkstemp's 0600
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"out.bin"});
}

// A full disk, simulated by a file-size limit (the write fails with EFBIG):
// the old file is untouched, the temporary is removed, the error says so.
TEST(FileIO, FailedWriteLeavesTheOldFileAndNoTemporary) {
  std::string dir = freshDir("efbig");
  std::string f = dir + "/out.npy";
  std::ofstream(f) << "old contents";
  std::vector<float> big(1 << 16, 1.0f);
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status npy = writeNpy(f, DType::F32, {int64_t(big.size())}, big.data());
  Status raw = writeFileAtomically(f, big.data(), big.size() * 4);
  Status ckpt = writeCheckpointFile(
      f,
      {CheckpointEntry{"w", DType::F32, {int64_t(big.size())},
                       reinterpret_cast<const uint8_t *>(big.data()),
                       big.size() * 4}},
      "{}");
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(npy.message(), f + ": write failed: File too large");
  EXPECT_EQ(raw.message(), f + ": write failed: File too large");
  EXPECT_EQ(ckpt.message(), f + ": write failed: File too large");
  EXPECT_EQ(slurp(f), "old contents");
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"out.npy"});
}

// Appends go to the same file (no rename: its inode stays) and add
// exactly the bytes given; one that a file-size limit stops partway is cut
// back to the old length, so a log never ends in half a line. A missing
// file or a device is refused, naming it.
TEST(FileIO, AppendAddsAllBytesOrNone) {
  std::string dir = freshDir("append");
  std::string f = dir + "/log.csv";
  ASSERT_TRUE(writeFileAtomically(f, "step\n", 5));
  struct stat before, after;
  ASSERT_EQ(::stat(f.c_str(), &before), 0);
  ASSERT_TRUE(appendToFile(f, "1\n", 2));
  ASSERT_TRUE(appendToFile(f, "2\n", 2, AtomicWriteOptions{true}));
  ASSERT_TRUE(appendToFile(f, "", 0));
  ASSERT_EQ(::stat(f.c_str(), &after), 0);
  EXPECT_EQ(slurp(f), "step\n1\n2\n");
  EXPECT_EQ(before.st_ino, after.st_ino);

  std::string rows(8192, 'x');
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096; // the first 4087 bytes fit, the rest do not
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status st = appendToFile(f, rows.data(), rows.size());
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(st.message(), f + ": write failed: File too large");
  EXPECT_EQ(slurp(f), "step\n1\n2\n");

  EXPECT_EQ(appendToFile(dir + "/none.csv", "1", 1).message(),
            dir + "/none.csv: cannot append: No such file or directory");
  EXPECT_EQ(appendToFile("/dev/null", "1", 1).message(),
            "/dev/null: cannot append: not a regular file");
}

// Renaming over a device would replace the node itself (as root): refused.
TEST(FileIO, NonRegularTargetsAreNotReplaced) {
  float v = 1;
  Status st = writeNpy("/dev/full", DType::F32, {1}, &v);
  EXPECT_EQ(st.message(), "/dev/full: cannot write: it exists and is not a "
                          "regular file (a character device)");
  struct stat s;
  ASSERT_EQ(::stat("/dev/full", &s), 0);
  EXPECT_TRUE(S_ISCHR(s.st_mode));
}
