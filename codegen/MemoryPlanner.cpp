// Arena planning: see MemoryPlanner.h. Greedy by size: the biggest buffers
// are placed first, each into the smallest gap left by the already-placed
// buffers it is live with (best fit), else at the end.
#include "codegen/MemoryPlanner.h"
#include "modelc/version.h"

#include <algorithm>
#include <limits>
#include <string>

namespace mc::codegen {

using rt::Status;

namespace {

uint64_t alignUp(uint64_t v) {
  return (v + rt::kAlignment - 1) / rt::kAlignment * rt::kAlignment;
}

std::string label(const Plan &plan, size_t i) {
  const std::string &n = plan.buffers[i].name;
  return "buffer " + std::to_string(i) + (n.empty() ? "" : " '" + n + "'");
}

} // namespace

Status computeLiveRanges(const Plan &plan, std::vector<LiveRange> *ranges) {
  const auto &bufs = plan.buffers;
  size_t n = bufs.size();
  for (size_t i = 0; i < n; ++i) {
    const PlanBuffer &b = bufs[i];
    for (int64_t d : b.shape)
      if (d < 0)
        return Status::error("memory planner: " + label(plan, i) +
                             " has a negative dimension");
    if (b.aliasOf < 0)
      continue;
    if (b.kind != fb::BufferKind::Arena)
      return Status::error("memory planner: " + label(plan, i) +
                           " is a constant or state alias");
    if (size_t(b.aliasOf) >= n || bufs[b.aliasOf].aliasOf >= 0 ||
        bufs[b.aliasOf].kind != fb::BufferKind::Arena)
      return Status::error("memory planner: " + label(plan, i) +
                           " aliases buffer " + std::to_string(b.aliasOf) +
                           ", which is not an arena root buffer");
    if (b.byteSize() > bufs[b.aliasOf].byteSize())
      return Status::error("memory planner: " + label(plan, i) +
                           " is larger than the buffer it aliases");
  }
  ranges->assign(n, LiveRange{std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min()});
  auto root = [&](uint32_t i) {
    return bufs[i].aliasOf >= 0 ? size_t(bufs[i].aliasOf) : size_t(i);
  };
  auto touch = [&](uint32_t i, int64_t t) {
    LiveRange &r = (*ranges)[root(i)];
    r.first = std::min(r.first, t);
    r.last = std::max(r.last, t);
  };
  // What a use may refer to: anything (step inputs), a writable buffer
  // (step outputs: Arena or State), or an Arena buffer (the signature).
  enum class Use { Read, Write, Signature };
  auto check = [&](uint32_t i, const std::string &where, Use use) {
    if (i >= n)
      return Status::error("memory planner: " + where + " refers to buffer " +
                           std::to_string(i) + " of " + std::to_string(n));
    fb::BufferKind kind = bufs[i].kind;
    if (kind == fb::BufferKind::Constant && use != Use::Read)
      return Status::error("memory planner: " + where + " is constant " +
                           label(plan, i) + "; it must be an arena buffer");
    if (kind == fb::BufferKind::State && use == Use::Signature)
      return Status::error("memory planner: " + where + " is state " +
                           label(plan, i) +
                           "; inputs and outputs must be arena buffers");
    if (kind != fb::BufferKind::Arena && kind != fb::BufferKind::Constant &&
        kind != fb::BufferKind::State)
      return Status::error("memory planner: " + label(plan, i) +
                           " has an unknown kind " +
                           std::to_string(int(kind)));
    return Status::ok();
  };
  int64_t steps = int64_t(plan.steps.size());
  for (int64_t s = 0; s < steps; ++s) {
    const PlanStep &st = plan.steps[s];
    std::string where = "step " + std::to_string(s);
    for (uint32_t i : st.inputs) {
      MC_RETURN_IF_ERROR(check(i, where + " input", Use::Read));
      touch(i, s);
    }
    for (uint32_t o : st.outputs) {
      MC_RETURN_IF_ERROR(check(o, where + " output", Use::Write));
      touch(o, s);
    }
  }
  for (const PlanSignature &sig : plan.inputs) {
    MC_RETURN_IF_ERROR(
        check(sig.buffer, "input '" + sig.name + "'", Use::Signature));
    touch(sig.buffer, -1);
  }
  for (const PlanSignature &sig : plan.outputs) {
    MC_RETURN_IF_ERROR(
        check(sig.buffer, "output '" + sig.name + "'", Use::Signature));
    touch(sig.buffer, steps);
  }
  for (size_t i = 0; i < n; ++i) {
    LiveRange &r = (*ranges)[i];
    if (bufs[i].kind != fb::BufferKind::Arena)
      r = LiveRange{};
    else if (r.first > r.last) // never used (or an alias, set below)
      r = LiveRange{};
  }
  for (size_t i = 0; i < n; ++i)
    if (bufs[i].aliasOf >= 0)
      (*ranges)[i] = (*ranges)[bufs[i].aliasOf];
  return Status::ok();
}

std::vector<uint64_t> layoutConstants(const Plan &plan, uint64_t *dataSize) {
  std::vector<uint64_t> offsets(plan.buffers.size(), 0);
  uint64_t size = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    if (plan.buffers[i].kind != fb::BufferKind::Constant)
      continue;
    offsets[i] = alignUp(size);
    size = offsets[i] + plan.buffers[i].byteSize();
  }
  *dataSize = size;
  return offsets;
}

std::vector<uint64_t> layoutState(const Plan &plan, uint64_t *stateSize) {
  std::vector<uint64_t> offsets(plan.buffers.size(), 0);
  uint64_t size = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    if (plan.buffers[i].kind != fb::BufferKind::State)
      continue;
    offsets[i] = alignUp(size);
    size = offsets[i] + plan.buffers[i].byteSize();
  }
  *stateSize = size;
  return offsets;
}

Status planMemory(Plan &plan) {
  std::vector<LiveRange> ranges;
  MC_RETURN_IF_ERROR(computeLiveRanges(plan, &ranges));
  uint64_t dataSize = 0;
  std::vector<uint64_t> constOffsets = layoutConstants(plan, &dataSize);
  std::vector<uint64_t> stateOffsets = layoutState(plan, &plan.stateSize);
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].kind == fb::BufferKind::Constant)
      plan.buffers[i].offset = constOffsets[i];
    else if (plan.buffers[i].kind == fb::BufferKind::State)
      plan.buffers[i].offset = stateOffsets[i];
  auto &bufs = plan.buffers;
  struct Placed {
    uint64_t offset, size;
    LiveRange range;
  };
  std::vector<size_t> order;
  uint64_t arena = 0;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].kind != fb::BufferKind::Arena || bufs[i].aliasOf >= 0)
      continue;
    uint64_t size = alignUp(bufs[i].byteSize());
    if (ranges[i].empty() || size == 0) {
      // Unused or empty: shares offset 0 with anything; the verifier still
      // wants it inside the arena.
      bufs[i].offset = 0;
      arena = std::max(arena, size);
      continue;
    }
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    uint64_t sa = bufs[a].byteSize(), sb = bufs[b].byteSize();
    if (sa != sb)
      return sa > sb;
    return ranges[a].first < ranges[b].first;
  });
  std::vector<Placed> placed;
  placed.reserve(order.size());
  std::vector<const Placed *> live;
  for (size_t i : order) {
    uint64_t size = alignUp(bufs[i].byteSize());
    live.clear();
    for (const Placed &p : placed)
      if (p.range.overlaps(ranges[i]))
        live.push_back(&p);
    std::sort(live.begin(), live.end(), [](const Placed *a, const Placed *b) {
      return a->offset < b->offset;
    });
    uint64_t best = 0, bestGap = std::numeric_limits<uint64_t>::max();
    bool found = false;
    uint64_t prevEnd = 0;
    for (const Placed *p : live) {
      if (p->offset > prevEnd) {
        uint64_t gap = p->offset - prevEnd;
        if (gap >= size && gap < bestGap) {
          best = prevEnd;
          bestGap = gap;
          found = true;
        }
      }
      prevEnd = std::max(prevEnd, p->offset + p->size);
    }
    if (!found)
      best = prevEnd;
    bufs[i].offset = best;
    placed.push_back(Placed{best, size, ranges[i]});
    arena = std::max(arena, best + size);
  }
  for (PlanBuffer &b : bufs)
    if (b.aliasOf >= 0)
      b.offset = bufs[b.aliasOf].offset;
  plan.arenaSize = arena;
  return Status::ok();
}

} // namespace mc::codegen
