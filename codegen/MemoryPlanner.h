// Arena planning for a Plan: live ranges over the steps, then offsets by
// greedy-by-size best fit (as in TFLite's arena planner). MLIR-free.
#ifndef MODELC_CODEGEN_MEMORYPLANNER_H
#define MODELC_CODEGEN_MEMORYPLANNER_H

#include "codegen/Plan.h"
#include "modelc/status.h"

#include <cstdint>
#include <vector>

namespace mc::codegen {

/// Steps during which a buffer's bytes must stay intact, inclusive. Inputs
/// start at -1 (written before step 0); outputs end at steps.size() (read
/// after the last step). An alias's uses extend its root's range.
struct LiveRange {
  int64_t first = 0, last = -1;
  bool empty() const { return last < first; }
  bool overlaps(const LiveRange &o) const {
    return !empty() && !o.empty() && first <= o.last && o.first <= last;
  }
};

/// Live ranges of every buffer, indexed like plan.buffers; aliases get their
/// root's range, constants, State buffers (which live in the state region,
/// not the arena) and never-used buffers an empty one. Fails on a malformed
/// plan (index out of range, alias of an alias or of a non-arena buffer,
/// alias larger than its root, a constant as a step output, a constant or
/// State buffer in the signature). State buffers may be step outputs (a
/// global store is a Copy into one).
rt::Status computeLiveRanges(const Plan &plan, std::vector<LiveRange> *ranges);

/// Offsets of the Constant buffers in the data section (in buffer order,
/// 64-byte aligned; 0 for other buffers) and the section's size. The one
/// layout of the data section: the planner records it, the writer uses it.
std::vector<uint64_t> layoutConstants(const Plan &plan, uint64_t *dataSize);

/// Offsets of the State buffers in the state region (in buffer order,
/// 64-byte aligned; 0 for other buffers) and the region's size.
std::vector<uint64_t> layoutState(const Plan &plan, uint64_t *stateSize);

/// Fills PlanBuffer::offset of every Arena buffer (aliases get their root's
/// offset) and Plan::arenaSize, of every Constant buffer (its place in the
/// data section, see layoutConstants), and of every State buffer with
/// Plan::stateSize (see layoutState). Offsets and sizes are 64-byte
/// aligned; buffers whose live ranges do not overlap may share bytes.
rt::Status planMemory(Plan &plan);

} // namespace mc::codegen

#endif // MODELC_CODEGEN_MEMORYPLANNER_H
