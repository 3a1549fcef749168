// .npy round trips for every dtype, and malformed files rejected with a
// message naming the file and the problem.
#include "modelc/npy.h"

#include <cstring>
#include <gtest/gtest.h>

using namespace mc::rt;

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::F32, DType::F16, DType::I32, DType::I64, DType::I1}) {
    for (Shape s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{0, 4}}) {
      size_t n = size_t(numElements(s)) * dtypeSize(t);
      std::vector<uint8_t> data(n);
      for (size_t i = 0; i < n; ++i)
        data[i] = t == DType::I1 ? uint8_t(i % 2) : uint8_t(i * 13 + 1);
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(encodeNpy(t, s, data.data(), &bytes));
      EXPECT_EQ((bytes.size() - n) % 64, 0u); // data 64-byte aligned
      NpyArray a;
      Status st = parseNpy(bytes.data(), bytes.size(), "t.npy", &a);
      ASSERT_TRUE(st) << st.message();
      EXPECT_EQ(a.dtype, t);
      EXPECT_EQ(a.shape, s);
      EXPECT_EQ(a.data, data);
    }
  }
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  float v[2] = {1, 2};
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(encodeNpy(DType::F32, {2}, v, &bytes));
  size_t len = bytes[8] | bytes[9] << 8;
  EXPECT_EQ((10 + len) % 64, 0u);
  std::string header(bytes.begin() + 10, bytes.begin() + 10 + long(len));
  EXPECT_EQ(header.rfind(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 0),
            0u);
  EXPECT_EQ(header.back(), '\n');
}

TEST(Npy, Bf16IsWrittenAsF4) {
  uint16_t bf[2] = {floatToBf16(1.5f), floatToBf16(-3.0f)};
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(encodeNpy(DType::BF16, {2}, bf, &bytes));
  NpyArray a;
  ASSERT_TRUE(parseNpy(bytes.data(), bytes.size(), "b.npy", &a));
  ASSERT_EQ(a.dtype, DType::F32);
  float f[2];
  std::memcpy(f, a.data.data(), 8);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -3.0f);
}

TEST(Npy, ReadsVersion2AndBoolAliases) {
  std::string header = "{'descr': '?', 'fortran_order': False, 'shape': (3,)}";
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
  uint32_t len = uint32_t(header.size());
  for (int i = 0; i < 4; ++i)
    bytes.push_back(uint8_t(len >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), {1, 0, 7});
  NpyArray a;
  Status st = parseNpy(bytes.data(), bytes.size(), "v2.npy", &a);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(a.dtype, DType::I1);
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 0, 1}));
}

TEST(Npy, MalformedFilesNameTheFileAndProblem) {
  float v[6] = {};
  std::vector<uint8_t> good;
  ASSERT_TRUE(encodeNpy(DType::F32, {2, 3}, v, &good));
  auto expectError = [](std::vector<uint8_t> b, const std::string &what) {
    NpyArray a;
    Status st = parseNpy(b.data(), b.size(), "bad.npy", &a);
    ASSERT_FALSE(st) << what;
    EXPECT_EQ(st.message().rfind("bad.npy: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  auto edit = [&](const std::string &from, const std::string &to) {
    std::string s(good.begin(), good.end());
    s.replace(s.find(from), from.size(), to);
    return std::vector<uint8_t>(s.begin(), s.end());
  };
  expectError({1, 2, 3}, "not a .npy file");
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  expectError(truncated, "truncated data");
  expectError(edit("'<f4'", "'>f4'"), "big-endian");
  expectError(edit("'<f4'", "'<f8'"), "unsupported dtype '<f8'");
  expectError(edit("False", "True "), "Fortran-order");
  expectError(edit("(2, 3)", "(2, x)"), "'shape'");
  expectError(edit("'shape'", "'shapf'"), "unexpected key");
  std::vector<uint8_t> v9 = good;
  v9[6] = 9;
  expectError(v9, "format version 9");
  std::vector<uint8_t> longHeader = good;
  longHeader[8] = 0xff;
  longHeader[9] = 0xff;
  expectError(longHeader, "truncated .npy header");
  NpyArray a;
  Status st = readNpy("/nonexistent/x.npy", &a);
  EXPECT_NE(st.message().find("/nonexistent/x.npy: cannot open"),
            std::string::npos);
}
