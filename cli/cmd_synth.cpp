// `sparge synth OUT.h5`: writes a seeded synthetic capture with known structure (tests, benchmarks).
#include <algorithm>
#include <cstdio>
#include <deque>
#include <future>
#include <thread>

#include "commands.h"
#include "guards.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/synthetic.h"

namespace sparge::cli {

void registerSynth(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("synth", "Write a synthetic capture with known attention structure");
  struct Opts {
    std::string out;
    core::SynthSpec spec;
    int entries = 1;
    std::string dtype = "float16";
    std::string layout = "HND";
    int threads = 0;
    bool compress = false;
    std::string grid;  // "T,H,W": an image / video entry
    int64_t gridOffset = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("out", o->out, "Output capture (.h5)")->required();
  cmd->add_option("--entries", o->entries, "Number of entries (layers)")->capture_default_str();
  cmd->add_option("--batch", o->spec.batch, "Batch size")->capture_default_str();
  cmd->add_option("--heads", o->spec.headsQ, "Query heads")->capture_default_str();
  cmd->add_option("--kv-heads", o->spec.headsKV, "KV heads (default: = heads)");
  cmd->add_option("--tokens", o->spec.tokensQ, "Query tokens")->capture_default_str();
  cmd->add_option("--kv-tokens", o->spec.tokensKV, "KV tokens (default: = tokens)");
  cmd->add_option("--dim", o->spec.headDim, "Head dim of q/k (and v unless --dim-v)")->capture_default_str();
  cmd->add_option("--dim-v", o->spec.headDimV, "Head dim of v");
  cmd->add_flag("--causal", o->spec.causal, "Mark entries causal");
  cmd->add_option("--dtype", o->dtype, "float16 | bfloat16 | float32")->capture_default_str();
  cmd->add_option("--layout", o->layout, "HND | NHD")->capture_default_str();
  cmd->add_option("--segment", o->spec.segment, "Tokens per attention segment")->capture_default_str();
  cmd->add_option("--sharpness", o->spec.sharpness, "Logit gap multiplier")->capture_default_str();
  cmd->add_option("--seed", o->spec.seed, "Random seed")->capture_default_str();
  cmd->add_option(
         "--outlier-heads", o->spec.outlierKvHeads,
         "KV heads with outlier keys: K channel 0 = ±--outlier-value, Q channel 0 = 0 (exact attention "
         "unchanged, INT8 Q·Kᵀ much worse); comma separated")
      ->delimiter(',');
  cmd->add_option("--outlier-value", o->spec.outlierValue, "Magnitude of the outlier keys")
      ->capture_default_str();
  cmd->add_option(
      "--grid", o->grid,
      "An image / video entry on a T,H,W token grid (after --grid-offset prompt tokens): Q and K smooth "
      "in the position plus noise, stored in row-major (t, h, w) order; --tokens is then T·H·W + offset");
  cmd->add_option("--grid-offset", o->gridOffset, "Prompt tokens before the grid (with --grid)")
      ->capture_default_str();
  cmd->add_option("--length-scale", o->spec.lengthScale,
                  "With --grid: cells along h and w over which Q and K stay alike")
      ->capture_default_str();
  cmd->add_option("--frame-length-scale", o->spec.frameLengthScale,
                  "With --grid: frames over which Q and K stay alike")
      ->capture_default_str();
  cmd->add_option("--noise", o->spec.noise, "With --grid: noise relative to the smooth part")
      ->capture_default_str();
  cmd->add_flag("--compress", o->compress,
                "Gzip the tensors (random data hardly compresses; off, writing and every later read are "
                "several times faster)");
  cmd->add_option("--threads", o->threads, "Entries generated at once (0 = one per core)")
      ->capture_default_str();
  cmd->callback([&action, o, cmd] {
    action = [o, cmd] {
      checkOutputs({{"out", o->out}}, {});  // before generating the data
      core::SynthSpec spec = o->spec;
      if (cmd->count("--kv-heads") == 0) spec.headsKV = spec.headsQ;
      if (cmd->count("--kv-tokens") == 0) spec.tokensKV = spec.tokensQ;
      if (cmd->count("--dim-v") == 0) spec.headDimV = spec.headDim;
      if (o->dtype == "float16" || o->dtype == "fp16")
        spec.dtype = core::DType::Float16;
      else if (o->dtype == "bfloat16" || o->dtype == "bf16")
        spec.dtype = core::DType::BFloat16;
      else if (o->dtype == "float32" || o->dtype == "fp32")
        spec.dtype = core::DType::Float32;
      else
        throw Error("--dtype", "unknown dtype '" + o->dtype + "': use float16, bfloat16 or float32");
      if (o->layout == "HND")
        spec.layout = core::Layout::HND;
      else if (o->layout == "NHD")
        spec.layout = core::Layout::NHD;
      else
        throw Error("--layout", "unknown layout '" + o->layout + "': use HND or NHD");
      if (o->entries < 1) throw Error("--entries", "must be at least 1");
      if (!o->grid.empty()) {
        spec.grid = core::parseGridShape(o->grid, "--grid");
        if (o->gridOffset < 0) throw Error("--grid-offset", "must be at least 0");
        spec.grid->offset = o->gridOffset;
        if (!(spec.lengthScale > 0) || !(spec.frameLengthScale > 0) || !(spec.noise >= 0))
          throw Error("--length-scale/--frame-length-scale/--noise",
                      "length scales must be > 0 and noise >= 0");
      } else if (cmd->count("--grid-offset")) {
        throw Error("--grid-offset", "needs --grid");
      }
      auto make = [spec](int i) {
        core::SynthSpec s = spec;
        s.seed = spec.seed + uint64_t(i) * 7919;
        char name[32];
        std::snprintf(name, sizeof name, "l%02d", i);
        s.name = name;
        core::EntryData e = core::makeSyntheticEntry(s);
        e.info.layer = i;
        return e;
      };
      // Entries are generated on several threads (each from its own seed, so the data does not depend on
      // the thread count), at most `threads` in memory at once, and written in order.
      const int threads =
          o->threads > 0 ? o->threads : int(std::max(1u, std::thread::hardware_concurrency()));
      core::writeAtomically(o->out, [&](const std::string& tmp) {
        core::CaptureWriter w(tmp, o->compress ? core::CaptureWriter::Compression::Gzip
                                               : core::CaptureWriter::Compression::None);
        w.setRootAttribute("source", "sparge synth (synthetic, seeded; not a real model)");
        std::deque<std::future<core::EntryData>> pending;
        int next = 0;
        for (int i = 0; i < o->entries; ++i) {
          for (; next < o->entries && next < i + threads; ++next)
            pending.push_back(std::async(std::launch::async, make, next));
          core::EntryData e = pending.front().get();
          pending.pop_front();
          w.addEntry(e.info, e.q, e.k, e.v);
        }
        w.close();
      });
      std::printf("wrote %s (%d entries)\n", o->out.c_str(), o->entries);
      return 0;
    };
  });
}

}  // namespace sparge::cli
