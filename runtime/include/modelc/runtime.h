/* modelc runtime C API: load a verified .mcpk artifact and run it.
 *
 * Two objects: an mc_model_t is the loaded, verified, immutable artifact
 * (weights included) and may be shared by threads; an mc_session_t owns the
 * arena (inputs, temporaries, outputs) of one execution stream, and for a
 * training step its state region (parameters, optimizer state), which runs
 * update in place. A server
 * creates one model and one session per worker thread.
 *
 * Errors are values: every call that can fail returns an mc_status_t, NULL
 * on success, else an object carrying a message the caller frees with
 * mc_status_free. Nothing here aborts or throws on bad input.
 */
#ifndef MODELC_RUNTIME_H
#define MODELC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_status_s* mc_status_t;
typedef struct mc_model_s mc_model_t;
typedef struct mc_session_s mc_session_t;

/* Element types; values match the artifact schema's DType. */
typedef enum mc_dtype_e {
  MC_DTYPE_F32 = 0,
  MC_DTYPE_F16 = 1,
  MC_DTYPE_BF16 = 2,
  MC_DTYPE_I32 = 3,
  MC_DTYPE_I64 = 4,
  MC_DTYPE_I1 = 5,
} mc_dtype_t;

#define MC_MAX_RANK 8

/* A tensor's signature. For a model with a dynamic batch
 * (mc_model_batch_bounds returns 1), the model's info has -1 in `dims` at
 * each dim that depends on the batch, and `byte_size` is the size at the
 * batch's max; mc_session_output_info gives the concrete shape and size of
 * the session's last run. */
typedef struct mc_tensor_info_s {
  const char* name; /* owned by the model */
  mc_dtype_t dtype;
  int32_t rank;
  int64_t dims[MC_MAX_RANK];
  size_t byte_size;
} mc_tensor_info_t;

/* --- status --- */
const char* mc_status_message(mc_status_t status);
void mc_status_free(mc_status_t status);

/* --- model --- */
mc_status_t mc_model_load_file(const char* path, mc_model_t** out_model);
/* Copies the bytes; `name` is used in error messages. */
mc_status_t mc_model_load_memory(const void* data, size_t size,
                                 const char* name, mc_model_t** out_model);
void mc_model_free(mc_model_t* model);

size_t mc_model_num_inputs(const mc_model_t* model);
size_t mc_model_num_outputs(const mc_model_t* model);
mc_status_t mc_model_input_info(const mc_model_t* model, size_t index,
                                mc_tensor_info_t* out_info);
mc_status_t mc_model_output_info(const mc_model_t* model, size_t index,
                                 mc_tensor_info_t* out_info);
/* A dynamic batch (schema 2.1): returns 1 when the model runs every batch
 * size in [min, max] and stores the bounds and opt (the size a session
 * binds first) in the non-NULL pointers; returns 0, storing 0s, for a
 * static model (and for a NULL model). An input's batch dims are the -1
 * entries of its info; mc_session_set_input takes any size in the bounds
 * there. */
int mc_model_batch_bounds(const mc_model_t* model, int64_t* out_min,
                          int64_t* out_max, int64_t* out_opt);
/* Index of the input/output called `name`; an error naming the known ones
 * when there is none. */
mc_status_t mc_model_find_input(const mc_model_t* model, const char* name,
                                size_t* out_index);
mc_status_t mc_model_find_output(const mc_model_t* model, const char* name,
                                 size_t* out_index);

/* --- session --- */
mc_status_t mc_session_create(const mc_model_t* model,
                              mc_session_t** out_session);
void mc_session_free(mc_session_t* session);

/* Copies `data` into the session. dtype, rank and static dims must match
 * the signature exactly, a batch dim must lie within the model's batch
 * bounds, and `byte_size` must be that of `dims`; the error names the
 * input, what was expected and what was given. Every input of a run must
 * give the same batch size. */
mc_status_t mc_session_set_input(mc_session_t* session, size_t index,
                                 mc_dtype_t dtype, int32_t rank,
                                 const int64_t* dims, const void* data,
                                 size_t byte_size);
/* Fails, naming it, if an input was never set. */
mc_status_t mc_session_run(mc_session_t* session);
/* Output `index`'s name, dtype, shape and byte size at the session's
 * current batch (that of its last run; before any run, the model's opt).
 * For a static model it equals mc_model_output_info. */
mc_status_t mc_session_output_info(const mc_session_t* session, size_t index,
                                   mc_tensor_info_t* out_info);
/* Copies output `index` into `dst`, which must be exactly the output's
 * byte size (mc_session_output_info). Works on every device. */
mc_status_t mc_session_copy_output(const mc_session_t* session, size_t index,
                                   void* dst, size_t byte_size);
/* Points at the output inside the session; valid until the next run. Only
 * on devices whose memory the host reads (the CPU); elsewhere an error that
 * says to use mc_session_copy_output. */
mc_status_t mc_session_output(const mc_session_t* session, size_t index,
                              const void** out_data, size_t* out_byte_size);

/* --- training state (schema 1.2) ---
 * A training artifact carries named State buffers (parameters, optimizer
 * moments, loss scale, step counter). Each session holds its own copy,
 * initialized from the artifact and updated in place by every run; these
 * calls read, write, save and restore it. Inference artifacts have none. */
size_t mc_model_num_state(const mc_model_t* model);
/* Name, dtype, shape and byte size of State buffer `index` (buffer order). */
mc_status_t mc_model_state_info(const mc_model_t* model, size_t index,
                                mc_tensor_info_t* out_info);
/* Copies State buffer `name` out of / into the session; `bytes` must equal
 * its byte size. */
mc_status_t mc_session_read_state(const mc_session_t* session,
                                  const char* name, void* dst, size_t bytes);
mc_status_t mc_session_write_state(mc_session_t* session, const char* name,
                                   const void* src, size_t bytes);
/* Saves every State buffer and `metadata_json` (stored verbatim; may be
 * NULL for none) to `path` atomically: a crash at any moment leaves the
 * previous file intact. Format: docs/runtime.md. */
mc_status_t mc_session_save_checkpoint(const mc_session_t* session,
                                       const char* path,
                                       const char* metadata_json);
/* Restores the state from `path`. The file's checksum must hold and it must
 * have exactly the model's State buffers, with equal dtypes and shapes (the
 * error names the mismatch); on error the state is unchanged. When
 * `metadata_json_out` is not NULL it receives the saved metadata, to free
 * with mc_string_free. */
mc_status_t mc_session_load_checkpoint(mc_session_t* session, const char* path,
                                       char** metadata_json_out);
void mc_string_free(char* s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MODELC_RUNTIME_H */
