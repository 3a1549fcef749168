// The C API (runtime.h): thin wrappers over Model and Session that turn
// Status into mc_status_t and never let an exception cross the boundary.
#include "modelc/model.h"
#include "modelc/runtime.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

using mc::rt::DType;
using mc::rt::Model;
using mc::rt::Session;
using mc::rt::Status;
using mc::rt::TensorInfo;

struct mc_status_s {
  std::string message;
};
struct mc_model_s {
  std::unique_ptr<Model> model;
};
struct mc_session_s {
  std::unique_ptr<Session> session;
};

// The C API's element types are the runtime's, value for value.
static_assert(int(MC_DTYPE_F32) == int(mc::rt::DType::F32) &&
                  int(MC_DTYPE_F16) == int(mc::rt::DType::F16) &&
                  int(MC_DTYPE_BF16) == int(mc::rt::DType::BF16) &&
                  int(MC_DTYPE_I32) == int(mc::rt::DType::I32) &&
                  int(MC_DTYPE_I64) == int(mc::rt::DType::I64) &&
                  int(MC_DTYPE_I1) == int(mc::rt::DType::I1),
              "mc_dtype_t and rt::DType are one encoding");

namespace {

mc_status_t toC(const Status &s) {
  if (s)
    return nullptr;
  return new (std::nothrow) mc_status_s{s.message()};
}

mc_status_t err(const char *msg) { return toC(Status::error(msg)); }

/// Runs `f` (returning Status), mapping exceptions (std::bad_alloc from a
/// huge but valid model) to a status.
template <typename F> mc_status_t guarded(F f) {
  try {
    return toC(f());
  } catch (const std::bad_alloc &) {
    return err("out of memory");
  } catch (const std::exception &e) {
    return toC(Status::error(std::string("internal error: ") + e.what()));
  } catch (...) {
    return err("internal error");
  }
}

/// Fills `out` from `t` with `shape` (its dims, -1 for a batch dim) and
/// `bytes`.
void fill(const TensorInfo &t, const mc::rt::Shape &shape, size_t bytes,
          mc_tensor_info_t *out) {
  out->name = t.name.c_str();
  out->dtype = mc_dtype_t(t.dtype);
  out->rank = int32_t(shape.size());
  for (int i = 0; i < MC_MAX_RANK; ++i)
    out->dims[i] = i < out->rank ? shape[i] : 0;
  out->byte_size = bytes;
}

mc_status_t info(const std::vector<TensorInfo> &infos, size_t index,
                 const char *what, mc_tensor_info_t *out) {
  if (!out)
    return err("null mc_tensor_info_t");
  if (index >= infos.size())
    return toC(Status::error(std::string(what) + " index " +
                             std::to_string(index) +
                             " is out of range (the model has " +
                             std::to_string(infos.size()) + ")"));
  const TensorInfo &t = infos[index];
  mc::rt::Shape dims = t.shape;
  for (size_t d = 0; d < t.batchScale.size(); ++d)
    if (t.batchScale[d])
      dims[d] = -1;
  fill(t, dims, t.byteSize, out);
  return nullptr;
}

} // namespace

extern "C" {

const char *mc_status_message(mc_status_t status) {
  return status ? status->message.c_str() : "ok";
}
void mc_status_free(mc_status_t status) { delete status; }

mc_status_t mc_model_load_file(const char *path, mc_model_t **out_model) {
  if (!path || !out_model)
    return err("mc_model_load_file: null argument");
  *out_model = nullptr;
  return guarded([&] {
    std::unique_ptr<Model> m;
    MC_RETURN_IF_ERROR(Model::loadFile(path, &m));
    *out_model = new mc_model_s{std::move(m)};
    return Status::ok();
  });
}

mc_status_t mc_model_load_memory(const void *data, size_t size,
                                 const char *name, mc_model_t **out_model) {
  if (!out_model)
    return err("mc_model_load_memory: null out_model");
  *out_model = nullptr;
  return guarded([&] {
    std::unique_ptr<Model> m;
    MC_RETURN_IF_ERROR(
        Model::loadMemory(data, size, name ? name : "<memory>", &m));
    *out_model = new mc_model_s{std::move(m)};
    return Status::ok();
  });
}

void mc_model_free(mc_model_t *model) { delete model; }

size_t mc_model_num_inputs(const mc_model_t *model) {
  return model ? model->model->inputs().size() : 0;
}
size_t mc_model_num_outputs(const mc_model_t *model) {
  return model ? model->model->outputs().size() : 0;
}

mc_status_t mc_model_input_info(const mc_model_t *model, size_t index,
                                mc_tensor_info_t *out_info) {
  if (!model)
    return err("null model");
  return info(model->model->inputs(), index, "input", out_info);
}
mc_status_t mc_model_output_info(const mc_model_t *model, size_t index,
                                 mc_tensor_info_t *out_info) {
  if (!model)
    return err("null model");
  return info(model->model->outputs(), index, "output", out_info);
}

int mc_model_batch_bounds(const mc_model_t *model, int64_t *out_min,
                          int64_t *out_max, int64_t *out_opt) {
  mc::rt::BatchBounds b;
  if (model)
    b = model->model->batch();
  if (out_min)
    *out_min = b.min;
  if (out_max)
    *out_max = b.max;
  if (out_opt)
    *out_opt = b.opt;
  return model && model->model->dynamicBatch() ? 1 : 0;
}

mc_status_t mc_model_find_input(const mc_model_t *model, const char *name,
                                size_t *out_index) {
  if (!model || !name)
    return err("mc_model_find_input: null argument");
  return guarded([&] { return model->model->findInput(name, out_index); });
}
mc_status_t mc_model_find_output(const mc_model_t *model, const char *name,
                                 size_t *out_index) {
  if (!model || !name)
    return err("mc_model_find_output: null argument");
  return guarded([&] { return model->model->findOutput(name, out_index); });
}

mc_status_t mc_session_create(const mc_model_t *model,
                              mc_session_t **out_session) {
  if (!model || !out_session)
    return err("mc_session_create: null argument");
  *out_session = nullptr;
  return guarded([&] {
    std::unique_ptr<Session> s;
    MC_RETURN_IF_ERROR(Session::create(*model->model, &s));
    *out_session = new mc_session_s{std::move(s)};
    return Status::ok();
  });
}

void mc_session_free(mc_session_t *session) { delete session; }

mc_status_t mc_session_set_input(mc_session_t *session, size_t index,
                                 mc_dtype_t dtype, int32_t rank,
                                 const int64_t *dims, const void *data,
                                 size_t byte_size) {
  if (!session)
    return err("mc_session_set_input: null session");
  if (rank < 0 || rank > MC_MAX_RANK || (rank > 0 && !dims))
    return toC(Status::error("mc_session_set_input: rank " +
                             std::to_string(rank) + " is invalid (0.." +
                             std::to_string(MC_MAX_RANK) +
                             ", with dims when > 0)"));
  return guarded([&] {
    mc::rt::Shape shape(dims, dims + rank);
    return session->session->setInput(index, DType(dtype), shape, data,
                                      byte_size);
  });
}

mc_status_t mc_session_run(mc_session_t *session) {
  if (!session)
    return err("mc_session_run: null session");
  return guarded([&] { return session->session->run(); });
}

mc_status_t mc_session_output(const mc_session_t *session, size_t index,
                              const void **out_data, size_t *out_byte_size) {
  if (!session)
    return err("mc_session_output: null session");
  return toC(session->session->output(index, out_data, out_byte_size));
}

mc_status_t mc_session_output_info(const mc_session_t *session, size_t index,
                                   mc_tensor_info_t *out_info) {
  if (!session || !out_info)
    return err("mc_session_output_info: null argument");
  return guarded([&] {
    const Session &s = *session->session;
    mc::rt::Shape shape;
    MC_RETURN_IF_ERROR(s.outputShape(index, &shape));
    const TensorInfo &t = s.model().outputs()[index];
    fill(t, shape, t.byteSizeAt(s.batch()), out_info);
    return Status::ok();
  });
}

mc_status_t mc_session_copy_output(const mc_session_t *session, size_t index,
                                   void *dst, size_t byte_size) {
  if (!session)
    return err("mc_session_copy_output: null session");
  return toC(session->session->copyOutput(index, dst, byte_size));
}

size_t mc_model_num_state(const mc_model_t *model) {
  return model ? model->model->states().size() : 0;
}

mc_status_t mc_model_state_info(const mc_model_t *model, size_t index,
                                mc_tensor_info_t *out_info) {
  if (!model)
    return err("null model");
  return info(model->model->states(), index, "state", out_info);
}

mc_status_t mc_session_read_state(const mc_session_t *session,
                                  const char *name, void *dst, size_t bytes) {
  if (!session || !name)
    return err("mc_session_read_state: null argument");
  return guarded([&] { return session->session->readState(name, dst, bytes); });
}

mc_status_t mc_session_write_state(mc_session_t *session, const char *name,
                                   const void *src, size_t bytes) {
  if (!session || !name)
    return err("mc_session_write_state: null argument");
  return guarded(
      [&] { return session->session->writeState(name, src, bytes); });
}

mc_status_t mc_session_save_checkpoint(const mc_session_t *session,
                                       const char *path,
                                       const char *metadata_json) {
  if (!session || !path)
    return err("mc_session_save_checkpoint: null argument");
  return guarded([&] {
    return session->session->saveCheckpoint(path,
                                            metadata_json ? metadata_json : "");
  });
}

mc_status_t mc_session_load_checkpoint(mc_session_t *session, const char *path,
                                       char **metadata_json_out) {
  if (!session || !path)
    return err("mc_session_load_checkpoint: null argument");
  if (metadata_json_out)
    *metadata_json_out = nullptr;
  return guarded([&] {
    std::string meta;
    MC_RETURN_IF_ERROR(session->session->loadCheckpoint(path, &meta));
    if (metadata_json_out) {
      char *s = static_cast<char *>(std::malloc(meta.size() + 1));
      if (!s)
        return Status::error("out of memory");
      std::memcpy(s, meta.data(), meta.size());
      s[meta.size()] = 0;
      *metadata_json_out = s;
    }
    return Status::ok();
  });
}

void mc_string_free(char *s) { std::free(s); }

} // extern "C"
