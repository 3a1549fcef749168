// The main graph's initializer raw data left out of a serialized ModelProto
// (see StripRawData.h). The protobuf wire format: each field is a varint
// tag (field number << 3 | wire type) and a value: a varint (type 0), 8
// bytes (1), a varint length and that many bytes (2: strings, bytes,
// messages) or 4 bytes (5).
#include "frontend/onnx/StripRawData.h"

namespace mc::onnx_wire {
namespace {

// Field numbers of onnx.proto3 (stable: they are the file format).
constexpr uint32_t kModelGraph = 7;       // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5; // GraphProto.initializer
constexpr uint32_t kTensorRawData = 9;    // TensorProto.raw_data
constexpr unsigned kLengthDelimited = 2;

struct Cursor {
  const uint8_t *p, *end;

  bool varint(uint64_t& value) {
    value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (p == end)
        return false;
      uint8_t byte = *p++;
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return false; // more than 10 bytes
  }
};

/// One field: its number and wire type, its bytes [begin, end), and for a
/// length-delimited field its payload [payload, end).
struct Field {
  uint32_t number = 0;
  unsigned wireType = 0;
  const uint8_t *begin = nullptr, *payload = nullptr, *end = nullptr;
};

bool nextField(Cursor& c, Field& f) {
  f.begin = c.p;
  uint64_t tag, ignored, length;
  if (!c.varint(tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
    return false;
  f.number = static_cast<uint32_t>(tag >> 3);
  f.wireType = tag & 7;
  switch (f.wireType) {
  case 0:
    if (!c.varint(ignored))
      return false;
    break;
  case 1:
  case 5: {
    size_t width = f.wireType == 1 ? 8 : 4;
    if (size_t(c.end - c.p) < width)
      return false;
    c.p += width;
    break;
  }
  case kLengthDelimited:
    if (!c.varint(length) || length > uint64_t(c.end - c.p))
      return false;
    f.payload = c.p;
    c.p += length;
    break;
  default: // groups (3, 4) are not used by onnx.proto
    return false;
  }
  f.end = c.p;
  return true;
}

void putVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void putMessage(std::string& out, uint32_t number, const std::string& body) {
  putVarint(out, (uint64_t(number) << 3) | kLengthDelimited);
  putVarint(out, body.size());
  out += body;
}

void append(std::string& out, const Field& f) {
  out.append(reinterpret_cast<const char*>(f.begin), f.end - f.begin);
}

/// Calls ON_FIELD(field) for each field of the message in [begin, end).
template <typename Fn>
bool forEachField(const uint8_t* begin, const uint8_t* end, Fn onField) {
  Cursor c{begin, end};
  while (c.p != c.end) {
    Field f;
    if (!nextField(c, f))
      return false;
    onField(f);
  }
  return true;
}

} // namespace

std::optional<StrippedModel> stripInitializerData(const uint8_t* data,
                                                  size_t size) {
  StrippedModel out;
  out.bytes.reserve(4096);
  auto tensor = [&](const Field& t) {
    std::string body;
    std::optional<Span> raw;
    bool ok = forEachField(t.payload, t.end, [&](const Field& f) {
      if (f.number == kTensorRawData && f.wireType == kLengthDelimited)
        raw = Span{uint64_t(f.payload - data), uint64_t(f.end - f.payload)};
      else // (the last raw_data wins, as protobuf's parse has it)
        append(body, f);
    });
    // An empty raw_data in its place: the tensor still has its one value
    // field (onnx::checker asks for exactly one).
    if (raw)
      putMessage(body, kTensorRawData, std::string());
    out.rawData.push_back(raw);
    return ok ? std::optional<std::string>(std::move(body)) : std::nullopt;
  };
  auto graph = [&](const Field& g) {
    std::string body;
    bool ok = true;
    bool walked = forEachField(g.payload, g.end, [&](const Field& f) {
      if (!ok)
        return;
      if (f.number != kGraphInitializer || f.wireType != kLengthDelimited)
        return append(body, f);
      std::optional<std::string> t = tensor(f);
      if (!t)
        ok = false;
      else
        putMessage(body, kGraphInitializer, *t);
    });
    return walked && ok ? std::optional<std::string>(std::move(body))
                        : std::nullopt;
  };
  bool ok = true;
  bool walked = forEachField(data, data + size, [&](const Field& f) {
    if (!ok)
      return;
    if (f.number != kModelGraph || f.wireType != kLengthDelimited)
      return append(out.bytes, f);
    std::optional<std::string> g = graph(f);
    if (!g)
      ok = false;
    else
      putMessage(out.bytes, kModelGraph, *g);
  });
  if (!walked || !ok)
    return std::nullopt;
  return out;
}

} // namespace mc::onnx_wire
