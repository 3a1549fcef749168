// .npy reader/writer (see npy.h for the dtype mapping). The reader treats the
// file as untrusted: every length and number is checked before use.
#include "modelc/npy.h"
#include "modelc/fileio.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

namespace mc::rt {

namespace {

const char kMagic[] = "\x93NUMPY";

struct HeaderParser {
  const std::string &s;
  size_t i = 0;

  void skipSpace() {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
      ++i;
  }
  bool eat(char c) {
    skipSpace();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool parseString(std::string *out) {
    skipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string::npos)
      return false;
    *out = s.substr(i, end - i);
    i = end + 1;
    return true;
  }
  bool parseWord(std::string *out) {
    skipSpace();
    size_t start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i])))
      ++i;
    *out = s.substr(start, i - start);
    return !out->empty();
  }
  bool parseInt(int64_t *out) {
    skipSpace();
    size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10)
        return false;
      v = v * 10 + (s[i++] - '0');
    }
    if (i < s.size() && s[i] == 'L') // Python 2 longs
      ++i;
    *out = v;
    return i > start;
  }
  bool parseShape(Shape *out) {
    if (!eat('('))
      return false;
    out->clear();
    while (!eat(')')) {
      int64_t d;
      if (!parseInt(&d) || out->size() >= 64)
        return false;
      out->push_back(d);
      if (!eat(',')) {
        if (!eat(')'))
          return false;
        break;
      }
    }
    return true;
  }
};

Status descrToDType(const std::string &d, DType *t) {
  std::string code = d;
  char order = code.empty() ? 0 : code[0];
  if (order == '<' || order == '|' || order == '=')
    code = code.substr(1);
  else if (order == '>')
    return Status::error("big-endian dtype '" + d + "' is not supported");
  if (code == "f4")
    *t = DType::F32;
  else if (code == "f2")
    *t = DType::F16;
  else if (code == "i4")
    *t = DType::I32;
  else if (code == "i8")
    *t = DType::I64;
  else if (code == "b1" || code == "?")
    *t = DType::I1;
  else
    return Status::error("unsupported dtype '" + d +
                         "' (supported: <f4, <f2, <i4, <i8, |b1)");
  return Status::ok();
}

const char *dtypeDescr(DType t) {
  switch (t) {
  case DType::F32:
  case DType::BF16: // widened, see npy.h
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::I1:
    return "|b1";
  }
  return nullptr;
}

} // namespace

Status parseNpy(const void *bytes, size_t size, const std::string &name,
                NpyArray *out) {
  auto fail = [&](const std::string &m) {
    return Status::error(name + ": " + m);
  };
  const uint8_t *p = static_cast<const uint8_t *>(bytes);
  if (size < 10 || std::memcmp(p, kMagic, 6) != 0)
    return fail("not a .npy file (missing the \\x93NUMPY magic)");
  uint8_t major = p[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = size_t(p[8]) | size_t(p[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return fail("truncated .npy header");
    headerLen = size_t(p[8]) | size_t(p[9]) << 8 | size_t(p[10]) << 16 |
                size_t(p[11]) << 24;
    headerStart = 12;
  } else {
    return fail("unsupported .npy format version " + std::to_string(major) +
                "." + std::to_string(p[7]) + " (supported: 1.0, 2.0, 3.0)");
  }
  if (headerLen > size - headerStart)
    return fail("truncated .npy header (header length " +
                std::to_string(headerLen) + ", file size " +
                std::to_string(size) + ")");
  std::string header(reinterpret_cast<const char *>(p + headerStart),
                     headerLen);
  HeaderParser hp{header};
  std::string descr;
  bool haveDescr = false, haveOrder = false, haveShape = false, fortran = false;
  Shape shape;
  if (!hp.eat('{'))
    return fail("malformed .npy header: expected a dict, got '" + header + "'");
  while (!hp.eat('}')) {
    std::string key, word;
    if (!hp.parseString(&key) || !hp.eat(':'))
      return fail("malformed .npy header '" + header + "'");
    if (key == "descr") {
      if (!hp.parseString(&descr))
        return fail("malformed .npy header: 'descr' is not a string (" +
                    header + ")");
      haveDescr = true;
    } else if (key == "fortran_order") {
      if (!hp.parseWord(&word) || (word != "True" && word != "False"))
        return fail("malformed .npy header: 'fortran_order' is not a bool");
      fortran = word == "True";
      haveOrder = true;
    } else if (key == "shape") {
      if (!hp.parseShape(&shape))
        return fail("malformed .npy header: 'shape' is not a tuple of "
                    "non-negative integers");
      haveShape = true;
    } else {
      return fail("malformed .npy header: unexpected key '" + key + "'");
    }
    if (!hp.eat(',')) {
      if (!hp.eat('}'))
        return fail("malformed .npy header '" + header + "'");
      break;
    }
  }
  if (!haveDescr || !haveOrder || !haveShape)
    return fail("malformed .npy header: needs 'descr', 'fortran_order' and "
                "'shape' (" +
                header + ")");
  if (fortran)
    return fail("Fortran-order arrays are not supported (save a C-order "
                "array, e.g. np.ascontiguousarray)");
  DType dtype = DType::F32;
  Status st = descrToDType(descr, &dtype);
  if (!st)
    return fail(st.message());
  // At most kMaxTensorElements: the byte count cannot overflow.
  int64_t elements = 0;
  if (Status limit = checkElementCount(shape, &elements); !limit)
    return fail(limit.message());
  uint64_t bytesNeeded = uint64_t(elements) * dtypeSize(dtype);
  size_t dataStart = headerStart + headerLen;
  uint64_t have = size - dataStart;
  if (have != bytesNeeded)
    return fail(std::string(have < bytesNeeded ? "truncated" : "corrupt") +
                " data: " + descr + shapeString(shape) + " needs " +
                std::to_string(bytesNeeded) + " bytes, the file has " +
                std::to_string(have));
  if (!out)
    return Status::ok();
  out->dtype = dtype;
  out->shape = std::move(shape);
  out->data.assign(p + dataStart, p + size);
  if (dtype == DType::I1) // NumPy bools are 0/1; make sure of it
    for (uint8_t &b : out->data)
      b = b != 0;
  return Status::ok();
}

Status readNpy(const std::string &path, NpyArray *out) {
  std::vector<uint8_t> bytes;
  MC_RETURN_IF_ERROR(readRegularFile(path, kMaxInputFileBytes, &bytes));
  return parseNpy(bytes.data(), bytes.size(), path, out);
}

Status encodeNpy(DType dtype, const Shape &shape, const void *data,
                 std::vector<uint8_t> *out) {
  const char *descr = dtypeDescr(dtype);
  if (!descr)
    return Status::error("npy: invalid dtype " + std::to_string(int(dtype)));
  for (int64_t d : shape)
    if (d < 0)
      return Status::error("npy: negative dimension in shape " +
                           shapeString(shape));
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : "") +
            (i + 1 < shape.size() ? ", " : "");
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces and a newline so the data starts 64-byte aligned.
  bool v2 = header.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  int64_t n = numElements(shape);
  size_t elem = dtype == DType::BF16 ? 4 : dtypeSize(dtype);
  out->assign(total + size_t(n) * elem, 0);
  uint8_t *p = out->data();
  std::memcpy(p, kMagic, 6);
  p[6] = v2 ? 2 : 1;
  for (size_t i = 0; i < prefix - 8; ++i) // little-endian header length
    p[8 + i] = uint8_t(header.size() >> (8 * i));
  std::memcpy(p + prefix, header.data(), header.size());
  p += total;
  if (dtype == DType::BF16) {
    const uint16_t *src = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i) {
      float f = bf16ToFloat(src[i]);
      std::memcpy(p + 4 * i, &f, 4);
    }
  } else if (n > 0) {
    std::memcpy(p, data, size_t(n) * elem);
  }
  return Status::ok();
}

Status writeNpy(const std::string &path, DType dtype, const Shape &shape,
                const void *data) {
  std::vector<uint8_t> bytes;
  MC_RETURN_IF_ERROR(encodeNpy(dtype, shape, data, &bytes));
  return writeFileAtomically(path, bytes.data(), bytes.size());
}

} // namespace mc::rt
