// The arena planner: random plans never place simultaneously-live buffers on
// the same bytes, offsets are aligned, and dead memory is actually reused.
#include "codegen/MemoryPlanner.h"

#include <gtest/gtest.h>
#include <random>

using namespace mc;
using codegen::Plan;
using codegen::PlanBuffer;
using codegen::PlanStep;

namespace {

/// Live ranges computed independently of the planner.
std::vector<std::pair<int64_t, int64_t>> referenceRanges(const Plan &p) {
  size_t n = p.buffers.size();
  std::vector<std::pair<int64_t, int64_t>> r(n, {INT64_MAX, INT64_MIN});
  auto root = [&](uint32_t i) {
    return p.buffers[i].aliasOf >= 0 ? size_t(p.buffers[i].aliasOf) : size_t(i);
  };
  auto touch = [&](uint32_t i, int64_t t) {
    auto &x = r[root(i)];
    x.first = std::min(x.first, t);
    x.second = std::max(x.second, t);
  };
  for (size_t s = 0; s < p.steps.size(); ++s) {
    for (uint32_t i : p.steps[s].inputs)
      touch(i, int64_t(s));
    for (uint32_t o : p.steps[s].outputs)
      touch(o, int64_t(s));
  }
  for (auto &sig : p.inputs)
    touch(sig.buffer, -1);
  for (auto &sig : p.outputs)
    touch(sig.buffer, int64_t(p.steps.size()));
  for (size_t i = 0; i < n; ++i)
    if (p.buffers[i].aliasOf >= 0)
      r[i] = r[p.buffers[i].aliasOf];
  return r;
}

Plan randomPlan(std::mt19937 &rng, int numSteps) {
  Plan p;
  auto add = [&](int64_t elems, fb::BufferKind kind = fb::BufferKind::Arena) {
    PlanBuffer b;
    b.shape = {elems};
    b.kind = kind;
    if (kind == fb::BufferKind::Constant)
      b.data = std::vector<uint8_t>(size_t(elems) * 4);
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  std::uniform_int_distribution<int64_t> size(1, 300);
  std::vector<uint32_t> values{add(size(rng)), add(size(rng))};
  p.inputs = {{"a", values[0]}, {"b", values[1]}};
  values.push_back(add(size(rng), fb::BufferKind::Constant));
  for (int s = 0; s < numSteps; ++s) {
    PlanStep st;
    st.op = rt::OpId::Add;
    std::uniform_int_distribution<size_t> pick(
        values.size() > 4 ? values.size() - 4 : 0, values.size() - 1);
    st.inputs = {values[pick(rng)], values[pick(rng)]};
    uint32_t out = add(size(rng));
    if (rng() % 4 == 0) { // a view of the new value, used later
      PlanBuffer view = p.buffers[out];
      view.aliasOf = out;
      p.buffers.push_back(view);
      values.push_back(uint32_t(p.buffers.size() - 1));
    }
    st.outputs = {out};
    values.push_back(out);
    p.steps.push_back(st);
  }
  p.outputs = {{"y", values.back()}};
  return p;
}

} // namespace

TEST(MemoryPlanner, RandomPlansNeverOverlapLiveBuffers) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    Plan p = randomPlan(rng, 1 + trial % 30);
    ASSERT_TRUE(codegen::planMemory(p));
    auto ranges = referenceRanges(p);
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const PlanBuffer &a = p.buffers[i];
      if (a.kind != fb::BufferKind::Arena)
        continue;
      EXPECT_EQ(a.offset % 64, 0u);
      EXPECT_LE(a.offset + a.byteSize(), p.arenaSize);
      if (a.aliasOf >= 0)
        EXPECT_EQ(a.offset, p.buffers[a.aliasOf].offset);
      for (size_t j = i + 1; j < p.buffers.size(); ++j) {
        const PlanBuffer &b = p.buffers[j];
        if (b.kind != fb::BufferKind::Arena || a.aliasOf == int64_t(j) ||
            b.aliasOf == int64_t(i) ||
            (a.aliasOf >= 0 && a.aliasOf == b.aliasOf))
          continue;
        bool live = ranges[i].first <= ranges[j].second &&
                    ranges[j].first <= ranges[i].second;
        bool disjoint = a.offset + a.byteSize() <= b.offset ||
                        b.offset + b.byteSize() <= a.offset;
        EXPECT_TRUE(!live || disjoint)
            << "trial " << trial << ": buffers " << i << " and " << j;
      }
    }
  }
}

TEST(MemoryPlanner, ChainReusesDeadMemory) {
  // x -> t1 -> t2 -> ... -> t9 (each 4 KiB): only two are live at once.
  Plan p;
  for (int i = 0; i < 10; ++i) {
    PlanBuffer b;
    b.shape = {1024};
    p.buffers.push_back(b);
    if (i > 0) {
      PlanStep s;
      s.op = rt::OpId::Neg;
      s.inputs = {uint32_t(i - 1)};
      s.outputs = {uint32_t(i)};
      p.steps.push_back(s);
    }
  }
  p.inputs = {{"x", 0}};
  p.outputs = {{"y", 9}};
  ASSERT_TRUE(codegen::planMemory(p));
  EXPECT_EQ(p.arenaSize, 2u * 4096); // vs 10 * 4096 without reuse
}

TEST(MemoryPlanner, RejectsMalformedPlans) {
  Plan p;
  PlanBuffer a, b;
  a.shape = {4};
  b.shape = {8};
  b.aliasOf = 0; // larger than its root
  p.buffers = {a, b};
  rt::Status st = codegen::planMemory(p);
  EXPECT_NE(st.message().find("larger than the buffer it aliases"),
            std::string::npos);
  p.buffers[1].shape = {4};
  p.buffers[1].aliasOf = 5;
  st = codegen::planMemory(p);
  EXPECT_NE(st.message().find("not an arena root"), std::string::npos);
  p.buffers[1].aliasOf = -1;
  PlanStep s;
  s.inputs = {0};
  s.outputs = {7};
  p.steps = {s};
  st = codegen::planMemory(p);
  EXPECT_NE(st.message().find("step 0 output refers to buffer 7"),
            std::string::npos);
}
