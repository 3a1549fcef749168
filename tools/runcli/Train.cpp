// `modelc-run --train`: runs a compiled training step over a dataset of .npy
// files for some epochs: batching, seeded shuffling, a progress line, a CSV
// log, an SVG loss curve, atomic checkpoints and exact resume. The step
// itself (forward, backward, optimizer update of the State buffers) is the
// artifact's; this file only feeds it batches and watches output 0, the
// loss. Usage and formats: docs/runtime.md.
#include "tools/runcli/RunCli.h"

#include "modelc/communicator.h"
#include "modelc/fileio.h"
#include "modelc/labels.h"
#include "modelc/device.h"
#include "modelc/model.h"
#include "modelc/npy.h"

#include <algorithm>
#include <zlib.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace mc::cli {

using rt::DType;
using rt::Status;

namespace {

const char kTrainUsage[] =
    "usage: %s MODEL.mcpk --data NAME=FILE.npy ... --batch B "
    "--epochs E\n"
    "         [--checkpoint DIR] [--checkpoint-every N] [--resume]\n"
    "         [--shuffle SEED] [--log-csv FILE] [--plot FILE.svg] [--quiet]\n"
    "         [--device cpu|cuda[:N]|auto] [--dp-timeout SECONDS]\n"
    "\n"
    "Trains with a compiled training step: each input of the artifact is one\n"
    "batch (leading dimension B) cut from the --data file of that name (N\n"
    "rows along dim 0, the same N for every file); output 0 is the loss.\n"
    "floor(N / B) steps make an epoch, the remainder dropped; with a dynamic\n"
    "batch (compiled with --batch=MIN..MAX) a last, partial batch takes it,\n"
    "its loss the mean over its samples, so an epoch sees every sample once\n"
    "(unless fewer than MIN remain). --shuffle\n"
    "SEED draws a new seeded permutation of the rows every epoch.\n"
    "--checkpoint DIR saves DIR/checkpoint.mcst atomically at the end of each\n"
    "epoch, or every N steps with --checkpoint-every N; --resume continues\n"
    "from it with exactly the batches a run without the interruption would\n"
    "have used (without --resume, a DIR that holds one is refused). --log-csv\n"
    "writes step,epoch,loss,loss_scale per step (and lr with a learning-rate\n"
    "schedule, grad_norm with --max-grad-norm);\n"
    "--plot writes the loss curve as an SVG image. The run stops (exit 1)\n"
    "when the loss is non-finite for 100 consecutive steps.\n"
    "\n"
    "Data parallel: mpirun -np N %s STEP.mcpk ... with a step compiled\n"
    "by modelc compile --train --dp-ranks=N at the per-rank batch; --batch is\n"
    "the global batch (N times the artifact's). Each rank trains on every\n"
    "N-th row of each epoch's order; rank 0 writes the checkpoint, log and\n"
    "plot. A collective that waits longer than --dp-timeout seconds (default\n"
    "300) stops every rank with an error naming the rank and the collective.\n"
    "CPU ranks talk through MPI; GPU ranks (--device cuda, one GPU per local\n"
    "rank) through NCCL, started by mpirun or by torchrun-style variables\n"
    "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT: rank 0 hands\n"
    "NCCL's id to the others over TCP at MASTER_ADDR:MASTER_PORT).\n";

constexpr int kMaxNonFinite = 100;
const char kCheckpointFile[] = "checkpoint.mcst";

struct Options {
  std::string model;
  std::string device = "auto"; // --device
  std::vector<std::pair<std::string, std::string>> data;
  long long batch = 0, epochs = 0, checkpointEvery = 0;
  std::string checkpointDir, csv, plot;
  bool resume = false, quiet = false, shuffle = false;
  unsigned long long seed = 0;
  double dpTimeout = 300; // --dp-timeout: seconds a collective may wait
  bool dpTimeoutGiven = false;
};

/// --log-csv's first line; the optimizer states a step has for logs add
/// their columns (kLoggedStates).
constexpr char kCsvHeader[] = "step,epoch,loss,loss_scale";

/// f32 scalar states a compiled step keeps for logs, read after each step:
/// the learning rate of a schedule (--lr-schedule, --warmup-steps) and the
/// gradients' norm before clipping (--max-grad-norm). Column name, state.
constexpr std::pair<const char *, const char *> kLoggedStates[] = {
    {"lr", "optimizer.lr"}, {"grad_norm", "optimizer.grad_norm"}};

/// One artifact input fed from a dataset file.
struct Feed {
  size_t input = 0;
  std::string path;
  rt::NpyArray array;
  size_t rowBytes = 0;
  std::vector<uint8_t> batch;
};

struct Point {
  long long step = 0, epoch = 0;
  double loss = 0;
  std::string csvRow; // its line in --log-csv
};

int fail(const std::string &tool, const std::string &msg) {
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), msg.c_str());
  return 1;
}

std::string typeString(DType t, const rt::Shape &s) {
  return std::string(rt::dtypeName(t)) + rt::shapeString(s);
}

bool parseCount(const std::string &s, long long *out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end || v < 1)
    return false;
  *out = v;
  return true;
}

/// A float element (f32/f16/bf16) as a double.
double floatAt(DType t, const void *p) {
  switch (t) {
  case DType::F32:
    return *static_cast<const float *>(p);
  case DType::F16:
    return rt::halfToFloat(*static_cast<const uint16_t *>(p));
  case DType::BF16:
    return rt::bf16ToFloat(*static_cast<const uint16_t *>(p));
  default:
    return NAN;
  }
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The row order of epoch `epoch` (0-based): a function of (seed, epoch)
/// only, so a resumed run sees the same batches. Fisher-Yates over
/// mt19937_64 with rejection sampling (no library distribution, whose
/// output may differ between standard libraries).
void permutation(int64_t n, bool shuffle, uint64_t seed, long long epoch,
                 std::vector<int64_t> *perm) {
  perm->resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    (*perm)[size_t(i)] = i;
  if (!shuffle)
    return;
  std::mt19937_64 rng(splitmix64(seed ^ splitmix64(uint64_t(epoch))));
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t bound = uint64_t(i) + 1;
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do
      r = rng();
    while (r >= limit);
    std::swap((*perm)[size_t(i)], (*perm)[size_t(r % bound)]);
  }
}

/// Where the value of "key" starts in a flat JSON object we wrote, or null
/// when the key is absent.
const char *jsonValue(const std::string &json, const std::string &key) {
  std::string k = "\"" + key + "\":";
  size_t at = json.find(k);
  if (at == std::string::npos)
    return nullptr;
  at += k.size();
  while (at < json.size() && json[at] == ' ')
    ++at;
  return json.c_str() + at;
}

/// The integer value of "key": false when absent or null.
bool jsonInt(const std::string &json, const std::string &key, long long *out) {
  const char *s = jsonValue(json, key);
  if (!s)
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno || end == s)
    return false;
  *out = v;
  return true;
}

/// The unsigned value of "key" (a --shuffle seed, up to 2^64 - 1): false
/// when absent or null.
bool jsonUint(const std::string &json, const std::string &key,
              unsigned long long *out) {
  const char *s = jsonValue(json, key);
  if (!s || *s == '-')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s)
    return false;
  *out = v;
  return true;
}

/// Whether a file can be written at `path` (its directory exists and is
/// writable, and it is not a directory itself), before the training that
/// precedes the write.
Status checkWritableFile(const std::string &path, const std::string &flag) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec))
    return Status::error(flag + " " + path + " is a directory, not a file");
  std::filesystem::path dir = p.parent_path();
  if (dir.empty())
    dir = ".";
  if (!std::filesystem::is_directory(dir, ec))
    return Status::error(flag + " " + path + ": the directory '" +
                         dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::error(flag + " " + path + ": cannot write in '" +
                         dir.string() + "': " + std::strerror(errno));
  return Status::ok();
}

/// Refuses outputs (--log-csv, --plot, the checkpoint file) that are an
/// input (the model, a --data file) or another output: writing one would
/// destroy the other.
Status checkOutputs(const Options &opt) {
  std::vector<std::pair<std::string, std::string>> inputs{
      {"the model", opt.model}};
  for (const auto &[name, path] : opt.data)
    inputs.push_back({"--data " + name, path});
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!opt.csv.empty())
    outputs.push_back({"--log-csv", opt.csv});
  if (!opt.plot.empty())
    outputs.push_back({"--plot", opt.plot});
  if (!opt.checkpointDir.empty())
    outputs.push_back(
        {"--checkpoint's file",
         (std::filesystem::path(opt.checkpointDir) / kCheckpointFile)
             .string()});
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const auto &[what, path] : inputs)
      if (rt::sameFile(outputs[i].second, path))
        return Status::error(outputs[i].first + " " + outputs[i].second +
                             " is " + what + " (" + path +
                             "): writing it would destroy it");
    for (size_t j = 0; j < i; ++j)
      if (rt::sameFile(outputs[i].second, outputs[j].second))
        return Status::error(outputs[i].first + " " + outputs[i].second +
                             " is also " + outputs[j].first +
                             ": one would overwrite the other");
  }
  return Status::ok();
}

std::string fmtLoss(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

//===--- The SVG loss curve ---===//

/// About `count` round tick values (1, 2, 5 x 10^k) covering [lo, hi].
std::vector<double> niceTicks(double lo, double hi, int count) {
  double span = hi - lo;
  if (!(span > 0))
    return {lo};
  double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9;
       v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string xmlEscape(const std::string &s) {
  std::string o;
  for (char c : s)
    o += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
         : c == '"' ? "&quot;" : std::string(1, c);
  return o;
}

/// A self-contained SVG (no library): axes with ticks and labels, the
/// per-step loss (light) and an exponential moving average (dark), epoch
/// boundaries as faint vertical lines. The loss axis is logarithmic when
/// every loss is positive and they span more than two decades.
Status writeSvg(const std::string &path, const std::string &title,
                const std::vector<Point> &points, long long stepsPerEpoch) {
  const double W = 800, H = 480, L = 80, R = 20, T = 40, B = 60;
  std::vector<Point> pts;
  for (const Point &p : points)
    if (std::isfinite(p.loss))
      pts.push_back(p);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
    << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" "
       "font-size=\"15\">"
    << xmlEscape(title) << "</text>\n";
  double x0 = 1, x1 = 2, y0 = 0, y1 = 1;
  bool logY = false;
  if (!pts.empty()) {
    x0 = double(pts.front().step);
    x1 = double(pts.back().step);
    y0 = y1 = pts.front().loss;
    for (const Point &p : pts) {
      y0 = std::min(y0, p.loss);
      y1 = std::max(y1, p.loss);
    }
    logY = y0 > 0 && y1 / y0 > 100;
    if (logY) {
      y0 = std::log10(y0);
      y1 = std::log10(y1);
    }
  }
  auto ty = [&](double v) { return logY ? std::log10(v) : v; };
  if (x1 <= x0)
    x1 = x0 + 1;
  if (y1 <= y0) {
    double pad = std::fabs(y0) > 0 ? std::fabs(y0) * 0.1 : 1;
    y0 -= pad;
    y1 += pad;
  }
  double pad = (y1 - y0) * 0.05;
  y0 = logY || y0 < 0 || y0 - pad >= 0 ? y0 - pad : 0.0;
  y1 += pad;
  auto X = [&](double s) { return L + (s - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); };
  // Axes, ticks, grid, labels.
  o << "<g stroke=\"#888\" stroke-width=\"1\">\n";
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R
    << "\" y2=\"" << H - B << "\"/>\n";
  o << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\""
    << H - B << "\"/>\n</g>\n";
  if (stepsPerEpoch > 0 && (x1 - x0) / double(stepsPerEpoch) <= 60)
    for (double s = std::ceil(x0 / double(stepsPerEpoch)) *
                    double(stepsPerEpoch);
         s <= x1; s += double(stepsPerEpoch))
      o << "<line x1=\"" << X(s) << "\" y1=\"" << T << "\" x2=\"" << X(s)
        << "\" y2=\"" << H - B
        << "\" stroke=\"#ddd\" stroke-dasharray=\"3,3\"/>\n";
  for (double t : niceTicks(x0, x1, 8)) {
    o << "<line x1=\"" << X(t) << "\" y1=\"" << H - B << "\" x2=\"" << X(t)
      << "\" y2=\"" << H - B + 5 << "\" stroke=\"#888\"/>\n";
    o << "<text x=\"" << X(t) << "\" y=\"" << H - B + 19
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  }
  std::vector<double> yTicks;
  if (logY)
    for (double k = std::ceil(y0); k <= y1; k += 1)
      yTicks.push_back(k);
  else
    yTicks = niceTicks(y0, y1, 6);
  for (double t : yTicks) {
    o << "<line x1=\"" << L - 5 << "\" y1=\"" << Y(t) << "\" x2=\"" << W - R
      << "\" y2=\"" << Y(t) << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << L - 8 << "\" y=\"" << Y(t) + 4
      << "\" text-anchor=\"end\">" << num(logY ? std::pow(10.0, t) : t)
      << "</text>\n";
  }
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 18
    << "\" text-anchor=\"middle\">step</text>\n";
  o << "<text x=\"18\" y=\"" << (T + H - B) / 2
    << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << (T + H - B) / 2
    << ")\">" << (logY ? "loss (log scale)" : "loss") << "</text>\n";
  // At most ~4000 vertices per line: every k-th point.
  size_t k = std::max<size_t>(1, pts.size() / 4000);
  auto polyline = [&](const std::vector<double> &ys, const char *color,
                      double width) {
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\""
      << width << "\" points=\"";
    for (size_t i = 0; i < pts.size(); i += k)
      o << num(X(double(pts[i].step))) << "," << num(Y(ty(ys[i]))) << " ";
    o << "\"/>\n";
  };
  // A centered moving average: unlike an exponential one it does not lag
  // behind a falling loss. On a log axis it averages the logs (a geometric
  // mean), so it runs through the middle of the cloud as drawn.
  std::vector<double> raw, smooth;
  for (const Point &p : pts)
    raw.push_back(p.loss);
  const long n = static_cast<long>(raw.size());
  const long half = std::max<long>(2, n / 60);
  std::vector<double> prefix(n + 1, 0.0);
  for (long i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + (logY ? std::log(raw[i]) : raw[i]);
  for (long i = 0; i < n; ++i) {
    long lo = std::max<long>(0, i - half), hi = std::min<long>(n, i + half + 1);
    double mean = (prefix[hi] - prefix[lo]) / double(hi - lo);
    smooth.push_back(logY ? std::exp(mean) : mean);
  }
  polyline(raw, "#9ecae1", 1);
  polyline(smooth, "#08519c", 2);
  o << "<g font-size=\"12\"><line x1=\"" << W - R - 170 << "\" y1=\"" << T + 10
    << "\" x2=\"" << W - R - 145 << "\" y2=\"" << T + 10
    << "\" stroke=\"#9ecae1\"/><text x=\"" << W - R - 140 << "\" y=\""
    << T + 14 << "\">loss per step</text>\n<line x1=\"" << W - R - 170
    << "\" y1=\"" << T + 28 << "\" x2=\"" << W - R - 145 << "\" y2=\""
    << T + 28 << "\" stroke=\"#08519c\" stroke-width=\"2\"/><text x=\""
    << W - R - 140 << "\" y=\"" << T + 32 << "\">moving average</text></g>\n";
  o << "</svg>\n";
  std::string svg = o.str();
  Status st = rt::writeFileAtomically(path, svg.data(), svg.size());
  if (!st)
    return Status::error("cannot write the plot: " + st.message());
  return Status::ok();
}

/// A test hook for data-parallel failure handling:
/// MODELC_DP_TEST_FAULT=RANK:STEP:hang|exit makes rank RANK hang (sleep) or
/// exit with code 3, without a word to the others, before global step STEP.
void testFault(int rank, long long step) {
  static const char *spec = std::getenv("MODELC_DP_TEST_FAULT");
  if (!spec)
    return;
  int r = -1;
  long long s = -1;
  char what[8] = {};
  if (std::sscanf(spec, "%d:%lld:%7s", &r, &s, what) != 3 || r != rank ||
      s != step)
    return;
  std::fprintf(stderr, "rank %d: MODELC_DP_TEST_FAULT: %s before step %lld\n",
               rank, what, step);
  std::fflush(stderr);
  if (std::strcmp(what, "exit") == 0)
    std::_Exit(3);
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

//===--- The training loop ---===//

/// The signal that asked a one-process run to stop (SIGINT, SIGTERM), or 0:
/// the run stops after the step (or checkpoint write) in progress, so no
/// half-written temporary is left behind.
volatile std::sig_atomic_t gStopSignal = 0;
extern "C" void onStopSignal(int sig) { gStopSignal = sig; }

class Trainer {
public:
  Trainer(std::string tool, Options opt)
      : tool_(std::move(tool)), opt_(std::move(opt)) {}
  /// Trains; in a data-parallel run, an error on this rank ends them all.
  int run() {
    int code = runSteps();
    return code ? abortWorld(code) : 0;
  }

private:
  int runSteps();
  Status setup();
  Status loadData();
  Status resumeFrom(const std::string &path);
  // A write at the end failed: the summary does not name the file.
  bool csvFailed_ = false, plotFailed_ = false;
  Status openCsv();
  Status writeCsv();
  Status saveCheckpoint();
  void progress(bool force);
  std::string metadata() const;

  std::string tool_;
  Options opt_;
  std::unique_ptr<rt::Model> model_;
  std::unique_ptr<rt::Session> session_;
  std::vector<Feed> feeds_;
  int64_t samples_ = 0;
  long long stepsPerEpoch_ = 0;
  /// The rows of an epoch's last step when it is a partial batch (a dynamic
  /// batch only), else 0; and the samples this epoch has trained on.
  long long lastBatch_ = 0, epochSamples_ = 0;
  // Position: the next step to run is step `step_` (0-based) of epoch
  // `epoch_` (0-based); `global_` steps have run in all.
  long long epoch_ = 0, step_ = 0, global_ = 0;
  long long lastSaved_ = -1;
  bool hasLossScale_ = false;
  DType lossScaleType_ = DType::F32;
  /// Per kLoggedStates entry: whether the step has it, and its last value.
  bool logged_[std::size(kLoggedStates)] = {};
  double loggedValue_[std::size(kLoggedStates)] = {};
  std::string csvHeader() const {
    std::string h = kCsvHeader;
    for (size_t i = 0; i < std::size(kLoggedStates); ++i)
      if (logged_[i])
        h += std::string(",") + kLoggedStates[i].first;
    return h;
  }
  std::string checkpointPath_;
  bool csvDirty_ = false; // rows since --log-csv was last written
  bool csvWhole_ = false;  // the log was written whole once: append
  size_t csvRows_ = 0;     // rows of history_ the log holds
  std::vector<Point> history_;
  // Progress of the current epoch.
  double lossSum_ = 0, lossScale_ = NAN;
  long long lossCount_ = 0, epochSteps_ = 0, epochBad_ = 0;
  std::chrono::steady_clock::time_point epochStart_, lastPrint_;
  bool tty_ = false;
  // Data parallelism: this process is rank `rank_` of `world_`; each step
  // it trains on `local_` rows of the global --batch.
  std::shared_ptr<rt::Communicator> comm_;
  // Under mpirun with --device cuda: MPI, beside NCCL (comm_), to hand
  // NCCL's id around and to end every rank after an error.
  std::shared_ptr<rt::Communicator> mpi_;
  int rank_ = 0, world_ = 1;
  long long local_ = 0;
  Status setupWorld(const std::string &kind, const rt::LaunchVars &vars);
  Status checkRanksAgree();
  uint64_t dataChecksum() const;
  int abortWorld(int code);
};

/// The CRC-32 (zlib) of every --data array's dtype, shape and bytes, in
/// input order: ranks given different files of the same length (another
/// copy of the data on one machine) would train on different samples.
uint64_t Trainer::dataChecksum() const {
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  auto add = [&](const void *p, size_t n) {
    const Bytef *b = static_cast<const Bytef *>(p);
    while (n > 0) {
      uInt chunk = uInt(std::min<size_t>(n, 1u << 30));
      crc = uint32_t(::crc32(crc, b, chunk));
      b += chunk;
      n -= chunk;
    }
  };
  for (const Feed &f : feeds_) {
    int32_t dtype = int32_t(f.array.dtype);
    add(&dtype, sizeof dtype);
    add(f.array.shape.data(), f.array.shape.size() * sizeof(int64_t));
    add(f.array.data.data(), f.array.data.size());
  }
  return crc;
}

/// Every rank of a data-parallel run must run the same artifact over the
/// same number of samples with the same options, or they would average
/// gradients of different models, or wait for each other in collectives
/// that never match. Each value is compared as 16-bit pieces through the
/// communicator's max of x and of -x (exact in f32); a mismatch names the
/// values that differ.
Status Trainer::checkRanksAgree() {
  if (world_ <= 1)
    return Status::ok();
  std::vector<std::pair<std::string, uint64_t>> values{
      {"the artifact's bytes", model_->checksums()}, // their checksums
      {"the number of samples", uint64_t(samples_)},
      {"the --data arrays", dataChecksum()},
      {"--batch", uint64_t(opt_.batch)},
      {"--epochs", uint64_t(opt_.epochs)},
      {"--shuffle", uint64_t(opt_.shuffle)},
      {"--shuffle's seed", opt_.shuffle ? opt_.seed : 0},
      {"--checkpoint-every", uint64_t(opt_.checkpointEvery)},
      {"--resume", uint64_t(opt_.resume)}};
  std::vector<float> pieces;
  for (const auto &v : values)
    for (int k = 0; k < 4; ++k)
      pieces.push_back(float((v.second >> (16 * k)) & 0xffff));
  size_t n = pieces.size();
  std::vector<float> all(2 * n);
  for (size_t i = 0; i < n; ++i) {
    all[i] = pieces[i];
    all[n + i] = -pieces[i];
  }
  MC_RETURN_IF_ERROR(comm_->allReduceHost(
      all.data(), all.size(), rt::ReduceOp::Max,
      "the check that every rank runs the same training"));
  std::string differ;
  for (size_t v = 0; v < values.size(); ++v)
    for (size_t k = 0; k < 4; ++k) {
      size_t i = 4 * v + k;
      if (all[i] != pieces[i] || -all[n + i] != pieces[i]) {
        differ += (differ.empty() ? "" : ", ") + values[v].first;
        break;
      }
    }
  if (!differ.empty())
    return Status::error(
        "the ranks do not run the same training: " + differ +
        " differ between ranks (every rank needs the same artifact, the "
        "same --data contents and the same --batch, --epochs, --shuffle, "
        "--checkpoint-every and --resume)");
  return Status::ok();
}

/// The GPU of this rank when --device names a kind without an ordinal
/// ("cuda", or "auto" that picks cuda): the launcher's local rank
/// (OMPI_COMM_WORLD_LOCAL_RANK under mpirun, LOCAL_RANK from torchrun), so
/// that the ranks of one machine take one GPU each.
std::string rankDevice(const std::string &spec, const std::string &kind,
                       const rt::LaunchVars &vars) {
  if (spec.find(':') != std::string::npos || kind == "cpu")
    return spec;
  int local = -1;
  if (const char *l = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    local = std::atoi(l);
  else if (vars.present)
    local = vars.localRank;
  if (local <= 0)
    return spec;
  return kind + ":" + std::to_string(local);
}

/// Starts the communicator of a data-parallel run on `device`'s kind:
/// under an MPI launcher, MPI (and NCCL over it on cuda, its unique id
/// handed around by MPI_Bcast); under a torchrun-style launch (WORLD_SIZE
/// and no MPI launcher), NCCL with its unique id sent by rank 0 over TCP
/// (MASTER_ADDR:MASTER_PORT). RANK / WORLD_SIZE, when set, must agree
/// with MPI's view. CPU ranks are MPI's only: modelc writes no collective
/// of its own.
Status Trainer::setupWorld(const std::string &kind,
                           const rt::LaunchVars &vars) {
  bool cuda = kind == "cuda";
  if (rt::startedByMpiLauncher()) {
    std::unique_ptr<rt::Communicator> mpi;
    MC_RETURN_IF_ERROR(rt::makeMpiCommunicator(&mpi));
    mpi->setTimeout(opt_.dpTimeout);
    rank_ = mpi->rank();
    world_ = mpi->size();
    // Kept before the checks below: a rank that fails them ends every rank
    // through MPI_Abort (abortWorld), rather than waiting in MPI_Finalize
    // for peers that wait in a collective for it.
    mpi_ = std::move(mpi);
    if (vars.present && vars.worldSize != world_)
      return Status::error("WORLD_SIZE=" + std::to_string(vars.worldSize) +
                           " but MPI's world has " + std::to_string(world_) +
                           " processes");
    if (const char *r = std::getenv("RANK")) {
      char *end = nullptr;
      long n = std::strtol(r, &end, 10);
      if (!*r || *end || n != rank_)
        return Status::error(std::string("RANK=") + r +
                             " but MPI says rank " + std::to_string(rank_));
    }
    if (!cuda) {
      comm_ = mpi_;
    } else {
      std::unique_ptr<rt::Communicator> nccl;
      rt::Communicator *m = mpi_.get();
      MC_RETURN_IF_ERROR(rt::makeNcclCommunicator(
          rank_, world_, opt_.dpTimeout,
          [m](std::string *id) {
            id->resize(128);
            return m->broadcast(id->data(), id->size(), 0);
          },
          &nccl));
      comm_ = std::move(nccl);
    }
    rt::setCurrentCommunicator(comm_);
    return Status::ok();
  }
  if (!vars.present)
    return Status::ok();
  if (!cuda) {
    if (vars.worldSize == 1)
      return Status::ok(); // one process: nothing to average
    return Status::error(
        "WORLD_SIZE=" + std::to_string(vars.worldSize) +
        " without an MPI launcher is a torchrun-style launch of NCCL ranks, "
        "which needs --device cuda; this process runs on " + kind +
        ". CPU ranks are MPI processes: start them with mpirun -np " +
        std::to_string(vars.worldSize) + " " + tool_ +
        " --train ... (modelc writes no collective of its own)");
  }
  std::unique_ptr<rt::Communicator> nccl;
  Status made = rt::makeNcclCommunicator(
      vars.rank, vars.worldSize, opt_.dpTimeout,
      [vars, t = opt_.dpTimeout](std::string *id) {
        return rt::tcpBroadcast(vars, t, id);
      },
      &nccl);
  if (!made && vars.worldSize == 1) {
    // One process needs no collective: say so and go on without NCCL.
    if (!opt_.quiet)
      std::fprintf(stderr, "%s: note: WORLD_SIZE=1 without NCCL (%s): one "
                           "process, nothing to average\n",
                   tool_.c_str(), made.message().c_str());
    return Status::ok();
  }
  MC_RETURN_IF_ERROR(made);
  rank_ = vars.rank;
  world_ = vars.worldSize;
  comm_ = std::move(nccl);
  rt::setCurrentCommunicator(comm_);
  return Status::ok();
}

/// After an error in a data-parallel run the other ranks may wait in a
/// collective forever: end them all.
int Trainer::abortWorld(int code) {
  if (mpi_ && world_ > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    mpi_->abort(code);
  }
  if (comm_ && world_ > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    comm_->abort(code);
  }
  return code;
}

Status Trainer::setup() {
  Status st = rt::Model::loadFile(opt_.model, &model_);
  if (!st)
    return st;
  rt::LaunchVars vars;
  MC_RETURN_IF_ERROR(rt::readLaunchVars(&vars));
  std::unique_ptr<rt::Device> device;
  MC_RETURN_IF_ERROR(rt::createDevice(opt_.device, &device, nullptr,
                                      artifactTargets(*model_)));
  // One GPU per rank of a machine.
  std::string mine = rankDevice(opt_.device, device->kind(), vars);
  if (mine != opt_.device) {
    device.reset();
    MC_RETURN_IF_ERROR(rt::createDevice(mine, &device, nullptr,
                                        artifactTargets(*model_)));
  }
  MC_RETURN_IF_ERROR(setupWorld(device->kind(), vars));
  // Said rather than refused: a launch script may pass it to every run.
  if (opt_.dpTimeoutGiven && world_ == 1 && !opt_.quiet)
    std::fprintf(stderr,
                 "%s: note: --dp-timeout has no effect here: this run is "
                 "one process (no mpirun, and WORLD_SIZE unset or 1), so no "
                 "collective waits on another rank\n",
                 tool_.c_str());
  MC_RETURN_IF_ERROR(rt::Session::create(*model_, std::move(device), &session_));
  if (world_ > 1 && rt::currentCommunicator().boundRanks() != world_)
    return Status::error(
        opt_.model + ": this process is rank " + std::to_string(rank_) +
        " of " + std::to_string(world_) +
        ", but the artifact averages no gradients over ranks: compile it "
        "with modelc compile --train --dp-ranks=" + std::to_string(world_));
  const auto &outs = model_->outputs();
  if (outs.empty())
    return Status::error(opt_.model +
                         ": the artifact has no outputs; --train needs output "
                         "0 to be the loss");
  if (rt::numElements(outs[0].shape) != 1 || !isFloat(outs[0].dtype))
    return Status::error(opt_.model + ": output 0 '" + outs[0].name + "' is " +
                         typeString(outs[0].dtype, outs[0].shape) +
                         "; --train needs output 0 to be the loss, one float "
                         "element");
  if (model_->states().empty())
    std::fprintf(stderr,
                 "%s: warning: %s has no State buffers: its runs change "
                 "nothing, so this trains nothing (compile a training step "
                 "with mc-autodiff and mc-optimizer)\n",
                 tool_.c_str(), opt_.model.c_str());
  size_t idx;
  if (model_->findState("loss_scale", &idx)) {
    const rt::TensorInfo &ls = model_->states()[idx];
    hasLossScale_ = isFloat(ls.dtype) && rt::numElements(ls.shape) == 1;
    lossScaleType_ = ls.dtype;
  }
  for (size_t i = 0; i < std::size(kLoggedStates); ++i)
    if (model_->findState(kLoggedStates[i].second, &idx)) {
      const rt::TensorInfo &s = model_->states()[idx];
      logged_[i] = s.dtype == DType::F32 && rt::numElements(s.shape) == 1;
    }
  return loadData();
}

Status Trainer::loadData() {
  const auto &inputs = model_->inputs();
  // --batch is the global batch; each rank trains on its share.
  if (world_ > 1) {
    if (opt_.batch % world_)
      return Status::error("--batch " + std::to_string(opt_.batch) +
                           " (the global batch) is not a multiple of the " +
                           std::to_string(world_) + " ranks");
  }
  local_ = opt_.batch / world_;
  std::set<size_t> given;
  for (const auto &[name, path] : opt_.data) {
    size_t index;
    MC_RETURN_IF_ERROR(model_->findInput(name, &index));
    if (!given.insert(index).second)
      return Status::error("--data for input '" + name + "' is given twice");
    const rt::TensorInfo &info = inputs[index];
    if (info.shape.empty())
      return Status::error("input '" + name + "' is " +
                           typeString(info.dtype, info.shape) +
                           ", a scalar; training inputs need a leading batch "
                           "dimension");
    if (model_->dynamicBatch()) {
      rt::BatchBounds b = model_->batch();
      if (info.batchScale.empty() || info.batchScale[0] != 1)
        return Status::error("input '" + name + "' is " + info.typeString() +
                             ": with a dynamic batch, every training input's "
                             "leading dimension must be the batch");
      if (local_ < b.min || local_ > b.max)
        return Status::error(
            "--batch " + std::to_string(opt_.batch) +
            (world_ > 1 ? " (" + std::to_string(local_) + " per rank over " +
                              std::to_string(world_) + " ranks)"
                        : std::string()) +
            " is outside the artifact's " +
            (world_ > 1 ? "per-rank " : "") + "batch bounds [" +
            std::to_string(b.min) + ", " + std::to_string(b.max) + "]");
    } else if (info.shape[0] != local_)
      return Status::error(
          "input '" + name + "' is " + typeString(info.dtype, info.shape) +
          ": its leading (batch) dimension is " +
          std::to_string(info.shape[0]) + ", but --batch is " +
          std::to_string(opt_.batch) +
          (world_ > 1 ? ", " + std::to_string(local_) + " per rank over " +
                            std::to_string(world_) + " ranks"
                      : std::string()) +
          " (the artifact was compiled for batches of " +
          std::to_string(info.shape[0]) +
          (world_ > 1 ? " per rank: --batch " +
                            std::to_string(info.shape[0] * world_)
                      : std::string()) +
          ")");
    Feed f;
    f.input = index;
    f.path = path;
    Status st = rt::readNpy(path, &f.array);
    if (!st)
      return Status::error("--data for input '" + name + "': " + st.message());
    rt::Shape row(info.shape.begin() + 1, info.shape.end());
    rt::Shape expect = row;
    expect.insert(expect.begin(), -1);
    std::string want = std::string(rt::dtypeName(info.dtype)) + "[N" +
                       (row.empty() ? "" : ", ") +
                       rt::shapeString(row).substr(1);
    // bf16 has no NumPy dtype: a bf16 input takes an f4 file, rounded.
    if (info.dtype == DType::BF16 && f.array.dtype == DType::F32) {
      std::vector<uint8_t> bf(f.array.data.size() / 2);
      MC_RETURN_IF_ERROR(
          rt::cast({DType::F32, f.array.shape, f.array.data.data()},
                   {DType::BF16, f.array.shape, bf.data()}));
      f.array.dtype = DType::BF16;
      f.array.data = std::move(bf);
    }
    const rt::Shape &got = f.array.shape;
    if (f.array.dtype != info.dtype || got.size() != info.shape.size() ||
        !std::equal(row.begin(), row.end(), got.begin() + 1))
      return Status::error(path + ": input '" + name + "' needs " + want +
                           (info.dtype == DType::BF16 ? " (as f4)" : "") +
                           " (N samples of " + typeString(info.dtype, row) +
                           "), got " + typeString(f.array.dtype, got));
    f.rowBytes = info.byteSizeAt(local_) / size_t(local_);
    f.batch.resize(info.byteSizeAt(local_));
    if (!feeds_.empty() && got[0] != samples_)
      return Status::error(
          "--data files disagree on the number of samples: " +
          feeds_[0].path + " has " + std::to_string(samples_) + ", " + path +
          " has " + std::to_string(got[0]));
    samples_ = got[0];
    feeds_.push_back(std::move(f));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!given.count(i))
      return Status::error("input '" + inputs[i].name + "' (" +
                           typeString(inputs[i].dtype, inputs[i].shape) +
                           ") has no data; pass --data " + inputs[i].name +
                           "=FILE.npy");
  if (inputs.empty())
    return Status::error(opt_.model + ": the artifact has no inputs to feed");
  // Class labels out of range would train on an all-zero one-hot row (loss
  // -0) without a word; checked once here, for the whole dataset.
  std::vector<rt::LabelInput> labels = rt::labelInputs(*model_);
  for (const Feed &f : feeds_)
    if (labels[f.input].classes > 0)
      MC_RETURN_IF_ERROR(rt::checkLabels(
          f.array.dtype, f.array.data.data(),
          int64_t(f.array.data.size() / rt::dtypeSize(f.array.dtype)),
          labels[f.input].classes,
          f.path + " (--data " + inputs[f.input].name + ")", 0,
          labels[f.input].ignored));
  // With a dynamic batch the last step of an epoch takes the remaining
  // samples (a partial batch, whose loss is the mean over them), unless
  // fewer remain than the artifact's smallest batch. Over ranks, each
  // takes the same share of them (lastBatch_ is one rank's rows): the
  // averaged gradient is the global batch's only when the shards are
  // equal, so the fewer than world_ samples left over are dropped.
  long long rest = samples_ % opt_.batch, share = rest / world_;
  lastBatch_ = share && model_->dynamicBatch() && share >= model_->batch().min
                   ? share
                   : 0;
  stepsPerEpoch_ = samples_ / opt_.batch + (lastBatch_ ? 1 : 0);
  if (stepsPerEpoch_ == 0)
    return Status::error("the data has " + std::to_string(samples_) +
                         " samples, fewer than one batch of " +
                         std::to_string(opt_.batch));
  long long dropped = rest - lastBatch_ * world_;
  std::string why =
      !model_->dynamicBatch()
          ? "the artifact's batch is static; compile it with --batch=1..B "
            "to keep them"
      : lastBatch_ ? "the last batch is split evenly over the " +
                         std::to_string(world_) + " ranks"
      : world_ > 1 ? "fewer than the artifact's smallest batch on each of "
                     "the " + std::to_string(world_) + " ranks"
                   : "fewer than the artifact's smallest batch";
  if (dropped && !opt_.quiet && rank_ == 0)
    std::fprintf(stderr,
                 "%s: note: %lld samples in batches of %lld: %lld steps per "
                 "epoch; the last %lld sample(s) of each epoch's order are "
                 "dropped (%s)\n",
                 tool_.c_str(), (long long)samples_, opt_.batch,
                 stepsPerEpoch_, dropped, why.c_str());
  return Status::ok();
}

std::string Trainer::metadata() const {
  std::string seed = opt_.shuffle ? std::to_string(opt_.seed) : "null";
  return "{\"format\":\"modelc-train\",\"epoch\":" + std::to_string(epoch_) +
         ",\"step_in_epoch\":" + std::to_string(step_) +
         ",\"global_step\":" + std::to_string(global_) +
         ",\"shuffle_seed\":" + seed + ",\"batch\":" +
         std::to_string(opt_.batch) + ",\"samples\":" +
         std::to_string(samples_) + ",\"steps_per_epoch\":" +
         std::to_string(stepsPerEpoch_) + "}";
}

Status Trainer::resumeFrom(const std::string &path) {
  std::string meta;
  MC_RETURN_IF_ERROR(session_->loadCheckpoint(path, &meta));
  long long epoch, step, global, batch, samples;
  unsigned long long seed = 0;
  if (!jsonInt(meta, "epoch", &epoch) ||
      !jsonInt(meta, "step_in_epoch", &step) ||
      !jsonInt(meta, "global_step", &global) ||
      !jsonInt(meta, "batch", &batch) || !jsonInt(meta, "samples", &samples))
    return Status::error(path + ": the checkpoint's metadata is not from "
                                "modelc-run --train (got '" +
                         meta + "')");
  if (batch != opt_.batch || samples != samples_)
    return Status::error(
        path + ": the checkpoint was written with --batch " +
        std::to_string(batch) + " over " + std::to_string(samples) +
        " samples; this run has --batch " + std::to_string(opt_.batch) +
        " over " + std::to_string(samples_) +
        " (resuming needs the same batches)");
  bool savedShuffle = jsonUint(meta, "shuffle_seed", &seed);
  if (!savedShuffle && meta.find("\"shuffle_seed\":null") == std::string::npos)
    return Status::error(path + ": the checkpoint's metadata has no valid "
                                "shuffle_seed (got '" +
                         meta + "')");
  if (savedShuffle && !opt_.shuffle) {
    opt_.shuffle = true;
    opt_.seed = seed;
    if (!opt_.quiet)
      std::fprintf(stderr, "%s: note: resuming with the checkpoint's --shuffle "
                           "%llu\n",
                   tool_.c_str(), seed);
  } else if (savedShuffle != opt_.shuffle ||
             (savedShuffle && seed != opt_.seed)) {
    return Status::error(
        path + ": the checkpoint was written " +
        (savedShuffle ? "with --shuffle " + std::to_string(seed)
                      : std::string("without --shuffle")) +
        "; resuming with other shuffling would not continue the same run");
  }
  if (epoch < 0 || step < 0 || step > stepsPerEpoch_ || global < 0)
    return Status::error(path + ": the checkpoint's position (epoch " +
                         std::to_string(epoch) + ", step " +
                         std::to_string(step) + ") is invalid");
  epoch_ = epoch;
  step_ = step;
  global_ = global;
  if (step_ == stepsPerEpoch_) {
    ++epoch_;
    step_ = 0;
  }
  lastSaved_ = global_;
  if (!opt_.quiet)
    std::fprintf(stderr,
                 "%s: resumed from %s: epoch %lld, step %lld, global step "
                 "%lld\n",
                 tool_.c_str(), path.c_str(), epoch_ + 1, step_, global_);
  return Status::ok();
}

Status Trainer::openCsv() {
  if (opt_.csv.empty())
    return Status::ok();
  // On resume, keep the rows up to the checkpoint (the steps after it are
  // run again) and take them into the plot.
  // A file that is not this run's log (another header, rows that are not
  // steps 1, 2, ...) is refused rather than rewritten with its rows kept;
  // a log that ends before the checkpoint is kept with a note of the gap.
  if (global_ > 0 && std::filesystem::exists(opt_.csv)) {
    std::ifstream in(opt_.csv);
    std::string line;
    bool header = true;
    long long lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      if (header) {
        header = false;
        if (line != csvHeader())
          return Status::error("--log-csv " + opt_.csv +
                               " is not a modelc training log (its "
                               "first line is '" +
                               line.substr(0, 60) + "', not '" + csvHeader() +
                               "'); give this run's log, or another file");
        continue;
      }
      Point p;
      char *end = nullptr;
      p.step = std::strtoll(line.c_str(), &end, 10);
      bool parsed = end != line.c_str() && *end == ',';
      if (parsed) {
        p.epoch = std::strtoll(end + 1, &end, 10);
        parsed = *end == ',';
      }
      if (parsed) {
        p.loss = std::strtod(end + 1, &end);
        parsed = *end == ',';
      }
      if (!parsed || p.step != (long long)history_.size() + 1) {
        if (parsed && p.step > global_)
          break; // steps after the checkpoint: run again
        return Status::error(
            "--log-csv " + opt_.csv + ": line " + std::to_string(lineNo) +
            " ('" + line.substr(0, 60) + "') is not step " +
            std::to_string(history_.size() + 1) +
            " of a training log; give this run's log, or another file");
      }
      if (p.step > global_)
        break;
      p.csvRow = line;
      history_.push_back(p);
    }
    if ((long long)history_.size() < global_ && !opt_.quiet && rank_ == 0)
      std::fprintf(stderr,
                   "%s: note: --log-csv %s ends at step %lld; the checkpoint "
                   "is at step %lld, so steps %lld to %lld are missing from "
                   "the log\n",
                   tool_.c_str(), opt_.csv.c_str(),
                   (long long)history_.size(), global_,
                   (long long)history_.size() + 1, global_);
  }
  return writeCsv();
}

Status Trainer::writeCsv() {
  csvDirty_ = false;
  if (opt_.csv.empty())
    return Status::ok();
  // Written at checkpoints, epoch ends and the end, so the file is always
  // complete and matches what was trained; a write that fails (a full
  // disk) is an error, never a truncated log. The first write is the whole
  // file (the header, and a resumed run's earlier rows), atomically; later
  // ones append the new rows, all or none (a rewrite each time made a long
  // run's logging quadratic: a million steps, checkpointed every thousand,
  // rewrote 15 GB). A log removed under the run is written whole again.
  std::string text;
  bool whole = !csvWhole_ || !std::filesystem::exists(opt_.csv);
  if (whole)
    text = csvHeader() + "\n";
  for (size_t i = whole ? 0 : csvRows_; i < history_.size(); ++i)
    text += history_[i].csvRow + "\n";
  Status st = whole ? rt::writeFileAtomically(opt_.csv, text.data(),
                                              text.size())
              : text.empty()
                  ? Status::ok()
                  : rt::appendToFile(opt_.csv, text.data(), text.size());
  if (!st)
    return Status::error("cannot write the CSV log: " + st.message());
  csvWhole_ = true;
  csvRows_ = history_.size();
  return Status::ok();
}

Status Trainer::saveCheckpoint() {
  if (checkpointPath_.empty() || lastSaved_ == global_)
    return Status::ok();
  if (rank_ != 0) { // every rank holds the same state; rank 0 writes it
    lastSaved_ = global_;
    return Status::ok();
  }
  // A state gone non-finite (a NaN in the data, a divergence without loss
  // scaling) would replace the last good checkpoint with one that can only
  // train NaN: keep the old one and stop.
  std::vector<uint8_t> bytes;
  for (const rt::TensorInfo &s : model_->states()) {
    if (!isFloat(s.dtype))
      continue;
    bytes.resize(s.byteSize);
    MC_RETURN_IF_ERROR(session_->readState(s.name, bytes.data(), bytes.size()));
    size_t width = rt::dtypeSize(s.dtype);
    for (size_t at = 0; at < bytes.size(); at += width)
      if (!std::isfinite(floatAt(s.dtype, bytes.data() + at)))
        return Status::error(
            "after step " + std::to_string(global_) + ", state '" + s.name +
            "' holds " + fmtLoss(floatAt(s.dtype, bytes.data() + at)) +
            " (element " + std::to_string(at / width) +
            "): not saving it over " +
            (lastSaved_ > 0 ? "the checkpoint of global step " +
                                  std::to_string(lastSaved_)
                            : std::string("the checkpoint path")) +
            " (" + checkpointPath_ +
            "); lower the learning rate, use dynamic loss scaling, or check "
            "the data for NaN and inf");
  }
  MC_RETURN_IF_ERROR(session_->saveCheckpoint(checkpointPath_, metadata()));
  lastSaved_ = global_;
  return Status::ok();
}

void Trainer::progress(bool force) {
  if (opt_.quiet || rank_ != 0)
    return;
  auto now = std::chrono::steady_clock::now();
  if (tty_ && !force &&
      std::chrono::duration<double>(now - lastPrint_).count() < 0.1)
    return;
  if (!tty_ && !force)
    return;
  lastPrint_ = now;
  double secs = std::chrono::duration<double>(now - epochStart_).count();
  double rate = secs > 0 ? double(epochSamples_) / secs : 0;
  char line[256];
  int n = std::snprintf(line, sizeof line,
                        "epoch %lld/%lld  step %lld/%lld  samples %lld/%lld  "
                        "loss %.6g",
                        epoch_ + 1, opt_.epochs, step_, stepsPerEpoch_,
                        epochSamples_, (long long)samples_,
                        lossCount_ ? lossSum_ / double(lossCount_) : NAN);
  if (epochBad_ && n > 0 && size_t(n) < sizeof line)
    n += std::snprintf(line + n, sizeof line - size_t(n),
                       " (%lld non-finite left out)", epochBad_);
  if (hasLossScale_ && n > 0 && size_t(n) < sizeof line)
    n += std::snprintf(line + n, sizeof line - size_t(n), "  loss_scale %g",
                       lossScale_);
  for (size_t i = 0; i < std::size(kLoggedStates); ++i)
    if (logged_[i] && n > 0 && size_t(n) < sizeof line)
      n += std::snprintf(line + n, sizeof line - size_t(n), "  %s %.4g",
                         kLoggedStates[i].first, loggedValue_[i]);
  if (n > 0 && size_t(n) < sizeof line)
    std::snprintf(line + n, sizeof line - size_t(n), "  %.0f samples/s", rate);
  if (tty_)
    std::fprintf(stderr, "\r%-78s", line);
  else
    std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
}

int Trainer::runSteps() {
  Status st = setup();
  if (!st) {
    fail(tool_, world_ > 1 ? "rank " + std::to_string(rank_) + ": " +
                                 st.message()
                           : st.message());
    return abortWorld(1);
  }
  if (!(st = checkRanksAgree())) {
    fail(tool_, "rank " + std::to_string(rank_) + ": " + st.message());
    return abortWorld(1);
  }
  if (rank_ != 0) { // logs, CSV and plots come from rank 0
    opt_.csv.clear();
    opt_.plot.clear();
  }
  if (!opt_.checkpointDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt_.checkpointDir, ec);
    if (ec)
      return fail(tool_, opt_.checkpointDir +
                             ": cannot create the checkpoint directory: " +
                             ec.message());
    checkpointPath_ =
        (std::filesystem::path(opt_.checkpointDir) / kCheckpointFile).string();
    // Found now, not after the first epoch's work.
    if (rank_ == 0 && access(opt_.checkpointDir.c_str(), W_OK | X_OK) != 0)
      return fail(tool_, opt_.checkpointDir +
                             ": cannot write checkpoints there: " +
                             std::strerror(errno));
    if (std::filesystem::is_directory(checkpointPath_, ec))
      return fail(tool_, checkpointPath_ +
                             " is a directory; the checkpoint is written "
                             "there as a file");
    // A run from the start would replace a checkpoint the user may want:
    // training over it takes --resume, or its removal.
    if (!opt_.resume && std::filesystem::exists(checkpointPath_, ec)) {
      fail(tool_, checkpointPath_ +
                      " already holds a checkpoint: --resume goes on from "
                      "it; to train from the start, remove it or give "
                      "another --checkpoint directory");
      return abortWorld(1);
    }
  }
  // The plot is written at the end: its directory is checked now.
  if (!opt_.plot.empty())
    if (Status w = checkWritableFile(opt_.plot, "--plot"); !w)
      return fail(tool_, w.message());
  if (opt_.resume) {
    if (std::filesystem::exists(checkpointPath_)) {
      if (!(st = resumeFrom(checkpointPath_)))
        return fail(tool_, st.message());
    } else if (!opt_.quiet) {
      std::fprintf(stderr, "%s: note: no checkpoint at %s yet; starting from "
                           "the beginning\n",
                   tool_.c_str(), checkpointPath_.c_str());
    }
  }
  if (epoch_ >= opt_.epochs) {
    if (rank_ == 0)
      std::printf("nothing to train: the checkpoint %s is %s epoch %lld "
                  "(global step %lld), and --epochs %lld asks for no more; "
                  "give a larger --epochs to go on\n",
                  checkpointPath_.c_str(), step_ ? "inside" : "at the end of",
                  step_ ? epoch_ + 1 : epoch_, global_, opt_.epochs);
    return 0;
  }
  if (!(st = openCsv()))
    return fail(tool_, st.message());
  tty_ = isatty(fileno(stderr));
  if (world_ == 1) {
    // Ctrl-C stops after the step in progress; a second one kills at once
    // (SA_RESETHAND). Data-parallel ranks keep the default: the launcher
    // ends them all.
    struct sigaction sa = {};
    sa.sa_handler = onStopSignal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }
  std::vector<int64_t> perm;
  int nonFinite = 0;
  long long firstBad = 0;
  int exitCode = 0;
  auto finish = [&]() {
    if (csvDirty_) {
      Status cs = writeCsv();
      if (!cs) {
        fail(tool_, cs.message());
        exitCode = 1;
        csvFailed_ = true;
      }
    }
    if (!opt_.plot.empty()) {
      std::string title = "training loss: " +
                          std::filesystem::path(opt_.model).filename().string();
      Status ps = writeSvg(opt_.plot, title, history_, stepsPerEpoch_);
      if (!ps) {
        fail(tool_, ps.message());
        exitCode = 1;
        plotFailed_ = true;
      }
    }
  };
  // A SIGINT or SIGTERM seen at a step's end or after a checkpoint write.
  auto stopBySignal = [&]() {
    if (tty_ && !opt_.quiet)
      std::fputc('\n', stderr);
    finish();
    int sig = gStopSignal;
    fail(tool_, std::string("stopped by ") +
                    (sig == SIGINT ? "SIGINT" : "SIGTERM") + " after step " +
                    std::to_string(global_) +
                    (lastSaved_ > 0 ? "; the checkpoint " + checkpointPath_ +
                                          " holds global step " +
                                          std::to_string(lastSaved_) +
                                          " (--resume goes on from it)"
                                    : std::string()));
    return 128 + sig;
  };
  for (; epoch_ < opt_.epochs; ++epoch_, step_ = 0) {
    permutation(samples_, opt_.shuffle, opt_.seed, epoch_, &perm);
    lossSum_ = 0;
    lossCount_ = 0;
    epochSteps_ = 0;
    epochBad_ = 0;
    epochSamples_ = step_ * opt_.batch; // a resumed epoch's steps so far
    epochStart_ = lastPrint_ = std::chrono::steady_clock::now();
    for (; step_ < stepsPerEpoch_;) {
      testFault(rank_, global_ + 1);
      long long rows =
          lastBatch_ && step_ == stepsPerEpoch_ - 1 ? lastBatch_ : local_;
      for (Feed &f : feeds_) {
        for (long long j = 0; j < rows; ++j) {
          // Rank r takes every world-th row of the epoch's order, as
          // PyTorch's DistributedSampler: together the ranks' rows of a
          // step are the global batch one process would take.
          int64_t row =
              perm[size_t(rank_ + world_ * (step_ * local_ + j))];
          std::memcpy(f.batch.data() + size_t(j) * f.rowBytes,
                      f.array.data.data() + size_t(row) * f.rowBytes,
                      f.rowBytes);
        }
        const rt::TensorInfo &info = model_->inputs()[f.input];
        if (!(st = session_->setInput(
                  f.input, info.dtype,
                  model_->dynamicBatch() ? info.shapeAt(rows) : info.shape,
                  f.batch.data(), size_t(rows) * f.rowBytes)))
          break;
      }
      if (st)
        st = session_->run();
      if (!st) {
        if (tty_ && !opt_.quiet)
          std::fputc('\n', stderr);
        finish();
        fail(tool_, (world_ > 1 ? "rank " + std::to_string(rank_) + ": "
                                : std::string()) +
                        "step " + std::to_string(global_ + 1) + ": " +
                        st.message());
        return abortWorld(1);
      }
      // The loss, copied out (works on every device).
      uint8_t out[8] = {};
      const rt::TensorInfo &lossInfo = model_->outputs()[0];
      if (lossInfo.byteSize <= sizeof(out))
        (void)session_->copyOutput(0, out, lossInfo.byteSize);
      double loss = floatAt(lossInfo.dtype, out);
      if (world_ > 1) {
        // The global batch's mean loss: the mean of the ranks' (equal
        // shards), as one process would report it.
        float mine = float(loss);
        if (!(st = comm_->allReduceHost(&mine, 1, rt::ReduceOp::Sum,
                                        "the loss all_reduce of step " +
                                            std::to_string(global_ + 1)))) {
          fail(tool_, st.message());
          return abortWorld(1);
        }
        loss = double(mine) / world_;
      }
      ++step_;
      ++global_;
      ++epochSteps_;
      epochSamples_ += rows * world_; // the global batch's
      if (hasLossScale_) {
        uint8_t buf[4];
        if (session_->readState("loss_scale", buf,
                                rt::dtypeSize(lossScaleType_)))
          lossScale_ = floatAt(lossScaleType_, buf);
      }
      std::string logged;
      for (size_t i = 0; i < std::size(kLoggedStates); ++i) {
        if (!logged_[i])
          continue;
        uint8_t buf[4];
        loggedValue_[i] = session_->readState(kLoggedStates[i].second, buf, 4)
                              ? floatAt(DType::F32, buf)
                              : NAN;
        logged += "," + fmtLoss(loggedValue_[i]);
      }
      history_.push_back(
          Point{global_, epoch_ + 1, loss,
                std::to_string(global_) + "," + std::to_string(epoch_ + 1) +
                    "," + fmtLoss(loss) + "," +
                    (hasLossScale_ ? fmtLoss(lossScale_) : "") + logged});
      csvDirty_ = true;
      if (std::isfinite(loss)) {
        // The epoch's mean loss weighs each step by its samples.
        lossSum_ += loss * double(rows);
        lossCount_ += rows;
        nonFinite = 0;
      } else {
        ++epochBad_;
        if (nonFinite++ == 0)
          firstBad = global_;
        // The loss is the ranks' mean: rank 0 tells it for all.
        if (tty_ && !opt_.quiet && rank_ == 0)
          std::fputc('\n', stderr);
        if (rank_ == 0)
          std::fprintf(stderr,
                       "%s: warning: step %lld (epoch %lld, step %lld/%lld): "
                       "the loss is %s%s\n",
                       tool_.c_str(), global_, epoch_ + 1, step_,
                       stepsPerEpoch_, fmtLoss(loss).c_str(),
                       hasLossScale_ ? " (with dynamic loss scaling the step "
                                       "is skipped and the scale backs off)"
                                     : "");
        if (nonFinite >= kMaxNonFinite) {
          finish();
          return fail(tool_, "the loss was non-finite for " +
                                 std::to_string(kMaxNonFinite) +
                                 " consecutive steps (steps " +
                                 std::to_string(firstBad) + " to " +
                                 std::to_string(global_) +
                                 "); stopping. Lower the learning rate or "
                                 "check the data");
        }
      }
      if (opt_.checkpointEvery > 0 && global_ % opt_.checkpointEvery == 0) {
        if (!(st = writeCsv()) || !(st = saveCheckpoint())) {
          finish();
          return fail(tool_, st.message());
        }
      }
      progress(step_ == stepsPerEpoch_);
      if (gStopSignal)
        return stopBySignal();
    }
    if (tty_ && !opt_.quiet)
      std::fputc('\n', stderr);
    if (csvDirty_ && !(st = writeCsv())) {
      finish();
      return fail(tool_, st.message());
    }
    if (opt_.checkpointEvery == 0) {
      // The position after the last step of this epoch: epoch_ + 1, step 0
      // (stored as this epoch with all its steps done).
      if (!(st = saveCheckpoint())) {
        finish();
        return fail(tool_, st.message());
      }
    }
    if (gStopSignal && epoch_ + 1 < opt_.epochs) // during the epoch's end
      return stopBySignal();
  }
  if (!(st = saveCheckpoint())) { // the end, with --checkpoint-every
    finish();
    return fail(tool_, st.message());
  }
  if (gStopSignal) // during the last step or the last writes
    return stopBySignal();
  finish();
  // The last epoch's mean loss as the progress line gives it: each step
  // weighed by its rows (a partial last batch counts less); non-finite
  // steps left out and counted.
  double last = NAN;
  long long lastSteps = 0, lastBad = 0;
  {
    double sum = 0, rows = 0;
    for (const Point &p : history_) {
      if (p.epoch != opt_.epochs)
        continue;
      ++lastSteps;
      if (!std::isfinite(p.loss)) {
        ++lastBad;
        continue;
      }
      long long inEpoch = p.step - (p.epoch - 1) * stepsPerEpoch_;
      double w = lastBatch_ && inEpoch == stepsPerEpoch_ ? double(lastBatch_)
                                                         : double(local_);
      sum += p.loss * w;
      rows += w;
    }
    if (rows > 0)
      last = sum / rows;
  }
  if (std::getenv("MODELC_PROFILE") && comm_) {
    const rt::CommStats &cs = comm_->stats();
    std::fprintf(stderr,
                 "%s: rank %d: all-reduce: %lld collectives, %.3f MB, "
                 "blocked %.3f ms in all (%.4f ms per step)\n",
                 tool_.c_str(), rank_, cs.collectives, cs.bytes / 1e6,
                 cs.blockedSeconds * 1e3,
                 global_ ? cs.blockedSeconds * 1e3 / double(global_) : 0.0);
  }
  if (rank_ != 0)
    return exitCode;
  std::string bad =
      lastBad ? " (" + std::to_string(lastBad) + " of its " +
                    std::to_string(lastSteps) +
                    " steps had a non-finite loss and are left out)"
              : std::string();
  std::printf("trained %lld epoch(s) of %lld steps (batch %lld, %lld "
              "samples): %lld steps in all; mean loss of the last epoch "
              "%.6g%s\n",
              opt_.epochs, stepsPerEpoch_, opt_.batch, (long long)samples_,
              global_, last, bad.c_str());
  if (!opt_.csv.empty() && !csvFailed_)
    std::printf("log:        %s\n", opt_.csv.c_str());
  if (!opt_.plot.empty() && !plotFailed_)
    std::printf("plot:       %s\n", opt_.plot.c_str());
  if (!checkpointPath_.empty()) {
    std::printf("checkpoint: %s (global step %lld)\n", checkpointPath_.c_str(),
                lastSaved_);
    // Where a person looks next: the trained model's inference artifact.
    std::printf("            its weights into an inference artifact: modelc "
                "compile MODEL --weights %s -o OUT.mcpk\n",
                checkpointPath_.c_str());
  }
  return exitCode;
}

} // namespace

int trainMain(int argc, char **argv) {
  std::string tool = argc > 0 && argv[0] ? argv[0] : "modelc-run";
  size_t slash = tool.rfind('/');
  if (slash != std::string::npos)
    tool = tool.substr(slash + 1);
  try {
    Options opt;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i], v;
      auto value = [&](const char *name) {
        std::string o = name;
        if (a == o) {
          if (i + 1 >= argc)
            throw std::runtime_error(o + " needs a value");
          v = argv[++i];
          return true;
        }
        if (a.rfind(o + "=", 0) == 0) {
          v = a.substr(o.size() + 1);
          return true;
        }
        return false;
      };
      auto count = [&](const char *name, long long *out) {
        if (!parseCount(v, out))
          throw std::runtime_error(std::string(name) +
                                   " needs a positive integer, got '" + v +
                                   "'");
      };
      if (a == "-h" || a == "--help") {
        // `modelc train` is `modelc-run --train`: the usage as invoked.
        std::string as = tool == "modelc train" ? tool : tool + " --train";
        std::printf(kTrainUsage, as.c_str(), as.c_str());
        return 0;
      }
      if (a == "--train") {
        continue;
      } else if (value("--data")) {
        size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
          return fail(tool, "--data needs NAME=FILE.npy, got '" + v + "'");
        opt.data.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      } else if (value("--batch")) {
        count("--batch", &opt.batch);
      } else if (value("--epochs")) {
        count("--epochs", &opt.epochs);
      } else if (value("--checkpoint-every")) {
        count("--checkpoint-every", &opt.checkpointEvery);
      } else if (value("--checkpoint")) {
        opt.checkpointDir = v;
      } else if (value("--shuffle")) {
        char *end = nullptr;
        errno = 0;
        opt.seed = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || errno || *end || v[0] == '-')
          return fail(tool, "--shuffle needs a non-negative integer seed, "
                            "got '" + v + "'");
        opt.shuffle = true;
      } else if (value("--dp-timeout")) {
        char *end = nullptr;
        opt.dpTimeout = std::strtod(v.c_str(), &end);
        if (v.empty() || *end || !(opt.dpTimeout > 0))
          return fail(tool, "--dp-timeout needs a positive number of "
                            "seconds, got '" + v + "'");
        opt.dpTimeoutGiven = true;
      } else if (value("--log-csv")) {
        opt.csv = v;
      } else if (value("--device")) {
        opt.device = v;
      } else if (value("--plot")) {
        opt.plot = v;
      } else if (a == "--resume") {
        opt.resume = true;
      } else if (a == "--quiet" || a == "-q") {
        opt.quiet = true;
      } else if (a.size() > 1 && a[0] == '-') {
        return fail(tool, "unknown option '" + a + "' for --train (see "
                          "--train --help)");
      } else if (!opt.model.empty()) {
        return fail(tool, "more than one model given ('" + opt.model +
                              "', '" + a + "')");
      } else {
        opt.model = a;
      }
    }
    if (opt.model.empty())
      return fail(tool, "--train needs a model (see --train --help)");
    if (opt.data.empty())
      return fail(tool, "--train needs --data NAME=FILE.npy for each input");
    if (!opt.batch)
      return fail(tool, "--train needs --batch B");
    if (!opt.epochs)
      return fail(tool, "--train needs --epochs E");
    if (opt.resume && opt.checkpointDir.empty())
      return fail(tool, "--resume needs --checkpoint DIR");
    if (opt.checkpointEvery && opt.checkpointDir.empty())
      return fail(tool, "--checkpoint-every needs --checkpoint DIR");
    if (Status clash = checkOutputs(opt); !clash)
      return fail(tool, clash.message());
    int code = Trainer(tool, std::move(opt)).run();
    rt::setCurrentCommunicator(nullptr); // MPI_Finalize, after the session
    return code;
  } catch (const std::exception &e) {
    return fail(tool, e.what());
  } catch (...) {
    return fail(tool, "internal error");
  }
}

} // namespace mc::cli
