// The runtime's C++ API: a loaded, verified artifact (Model) and one
// execution stream over it (Session). The C API in runtime.h wraps these;
// modelc-run and the tests use them directly.
#ifndef MODELC_MODEL_H
#define MODELC_MODEL_H

#include "mcpk_generated.h"
#include "modelc/kernels.h"
#include "modelc/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mc::rt {

class Device;

/// Bytes aligned to 64 (the loaded file; the session arena).
class AlignedBytes {
public:
  AlignedBytes() = default;
  /// Leaves `data()` null when the allocation fails.
  explicit AlignedBytes(size_t size);
  AlignedBytes(AlignedBytes &&) noexcept;
  AlignedBytes &operator=(AlignedBytes &&) noexcept;
  AlignedBytes(const AlignedBytes &) = delete;
  AlignedBytes &operator=(const AlignedBytes &) = delete;
  ~AlignedBytes();
  uint8_t *data() const { return data_; }
  size_t size() const { return size_; }

private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

/// Checks that `bytes` is a well-formed .mcpk (layout, flatbuffers verifier,
/// version, checksums, every semantic rule; see docs/artifact-format.md).
/// `name` (the file) prefixes the error message. Does not copy. With
/// `checkTargets` (loading), a file whose targets no device here runs is
/// refused first; the compiler's own check of what it writes skips that (a
/// CUDA artifact is written on machines without a GPU). Without
/// `checkDataCrc`, the data section is not read at all (the compiler's
/// check of a file it streamed to disk, whose CRC it computed itself from
/// the same bytes: reading it back would bring the weights into memory a
/// second time).
Status verifyArtifact(const uint8_t *bytes, size_t size,
                      const std::string &name, bool checkTargets = true,
                      bool checkDataCrc = true);

/// The bounds of a dynamic batch (schema 2.1): one model runs every batch
/// size in [min, max]; memory is planned at max; opt is the size the
/// session binds first and `modelc-run --bench` times.
struct BatchBounds {
  int64_t min = 0, max = 0, opt = 0;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  /// With a dynamic batch, the shape and bytes at the batch's max.
  Shape shape;
  size_t byteSize = 0;
  uint32_t buffer = 0; // index into the model's buffers
  /// Empty when every dim is static; else per dim 0 (static) or c > 0 (the
  /// dim is c * batch). An input's entries are 0 or 1.
  std::vector<int64_t> batchScale;

  bool dynamic() const { return !batchScale.empty(); }
  /// The shape and bytes at batch size `batch` (a static tensor's at any).
  Shape shapeAt(int64_t batch) const;
  size_t byteSizeAt(int64_t batch) const;
  /// "f32[?, 784]" ("?" at a batch dim), "f32[4, 784]" when static.
  std::string typeString() const;
};

/// A verified artifact, immutable once loaded; may be shared by threads.
class Model {
public:
  /// `checkTargets` false: load a file this machine cannot run (to
  /// inspect it).
  static Status loadFile(const std::string &path, std::unique_ptr<Model> *out,
                         bool checkTargets = true);
  /// Copies the bytes.
  static Status loadMemory(const void *data, size_t size,
                           const std::string &name,
                           std::unique_ptr<Model> *out);

  const std::string &name() const { return name_; }
  const fb::Model &table() const { return *table_; }
  /// The data section (weights), 64-byte aligned.
  const uint8_t *constantData() const { return constants_; }
  uint64_t constantBytes() const { return table_->data_size(); }
  uint64_t fileSize() const { return bytes_.size(); }
  /// The checksums the file carries, verified at load: its table's (from
  /// the trailer) in the high word, its data section's in the low one. Two
  /// artifacts with the same pair hold the same steps and weights, which
  /// data-parallel ranks compare without reading the file again.
  uint64_t checksums() const;

  /// Whether the model runs a range of batch sizes (Model.batch present),
  /// and that range; {0, 0, 0} for a static model.
  bool dynamicBatch() const { return table_->batch() != nullptr; }
  BatchBounds batch() const;

  const std::vector<TensorInfo> &inputs() const { return inputs_; }
  const std::vector<TensorInfo> &outputs() const { return outputs_; }
  /// The State buffers (training state: parameters, optimizer moments,
  /// counters), in buffer order; names are unique. Empty for inference.
  const std::vector<TensorInfo> &states() const { return states_; }
  /// Errors name the known inputs/outputs/states.
  Status findInput(const std::string &name, size_t *index) const;
  Status findOutput(const std::string &name, size_t *index) const;
  Status findState(const std::string &name, size_t *index) const;
  /// The state region's size and its initial image (inside the data
  /// section; null when the size is 0).
  uint64_t stateSize() const { return table_->state_size(); }
  const uint8_t *stateImage() const {
    return stateSize() ? constants_ + table_->state_data_offset() : nullptr;
  }

private:
  Model() = default;
  static Status fromBytes(AlignedBytes bytes, const std::string &name,
                          std::unique_ptr<Model> *out, bool checkTargets = true);

  std::string name_;
  AlignedBytes bytes_; // the whole file
  const fb::Model *table_ = nullptr;
  const uint8_t *constants_ = nullptr;
  std::vector<TensorInfo> inputs_, outputs_, states_;
};

/// One execution stream: owns the arena (inputs, temporaries, outputs) and
/// the state region (training state), which starts as a copy of the model's
/// initial image and keeps its bytes between runs: a training step updates
/// it in place. Not thread-safe; use one session per thread.
class Session {
public:
  /// On the CPU device.
  static Status create(const Model &model, std::unique_ptr<Session> *out);
  /// On `device` (see createDevice in device.h): refuses a model whose
  /// targets the device does not run, and a step with no kernel on it,
  /// naming them.
  static Status create(const Model &model, std::unique_ptr<Device> device,
                       std::unique_ptr<Session> *out);
  ~Session();
  const Device &device() const;

  const Model &model() const { return model_; }
  /// Copies `data` in; dtype, rank and static dims must match the
  /// signature, a batch dim must lie in the model's batch bounds, and the
  /// byte size must be that of `shape`.
  Status setInput(size_t index, DType dtype, const Shape &shape,
                  const void *data, size_t byteSize);
  /// Runs every step; fails naming any input never set, or two inputs that
  /// disagree on the batch size. Allocates only on the first run at a batch
  /// size whose kernels are not bound (see batch()).
  Status run();
  /// The batch size the kernels are bound for: the last run's (before any
  /// run, the model's opt); 0 for a static model.
  int64_t batch() const;
  /// Output `index`'s shape at the current batch (its signature's for a
  /// static model).
  Status outputShape(size_t index, Shape *shape) const;
  /// The output's bytes inside the arena at the current batch, valid until
  /// the next run(); only on devices whose memory the host reads (the CPU).
  Status output(size_t index, const void **data, size_t *byteSize) const;
  /// Copies output `index` into caller memory of exactly its byte size at
  /// the current batch; on every device.
  Status copyOutput(size_t index, void *dst, size_t byteSize) const;

  /// Copies State buffer `name` out / in; `byteSize` must be its size.
  Status readState(const std::string &name, void *dst, size_t byteSize) const;
  Status writeState(const std::string &name, const void *src,
                    size_t byteSize);
  /// Back to the model's initial state image.
  void resetState();
  /// Saves every State buffer (name, dtype, shape, bytes) and `metadata`
  /// (the caller's, stored verbatim; by convention JSON) to `path`,
  /// atomically (see writeCheckpointFile in checkpoint.h).
  Status saveCheckpoint(const std::string &path,
                        const std::string &metadata) const;
  /// Restores the state from a checkpoint: the file must pass its checks
  /// and hold exactly this model's State buffers with equal dtypes and
  /// shapes (the error names the first mismatch); on any error the state is
  /// left unchanged. `metadata` (may be null) receives the saved metadata.
  Status loadCheckpoint(const std::string &path, std::string *metadata);

private:
  struct Impl;
  explicit Session(const Model &model);
  const Model &model_;
  std::unique_ptr<Impl> impl_;
};

} // namespace mc::rt

#endif // MODELC_MODEL_H
