// Not a test: times the three ways a job over several ranks can produce one masks file, on results of a
// realistic size (default 28 entries x 32 heads x 16K tokens, 128x64 tiles), under mpirun:
//   gather  every rank sends its whole results to rank 0 (what `sparge run` does), rank 0 writes the file;
//   copy    every rank writes a part file, rank 0 copies the parts' groups into one file (H5Ocopy);
//   links   every rank writes a part file, rank 0 writes a file of external links to the parts.
// usage: mpirun -np N sparge_mask_bench [entries heads tokens]   (SPARGE_MPI_PLUGIN names the plugin)
#include <hdf5.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "sparge/core/exports.h"
#include "sparge/scaleout/codec.h"
#include "sparge/scaleout/transport.h"
#include "sparge/scaleout/wire.h"

namespace {

using namespace sparge;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A run result with every per-head array `sparge run` produces, filled with seeded random blocks.
core::EntryResult fakeResult(int index, int64_t heads, int64_t tokens) {
  core::EntryResult r;
  char name[16];
  std::snprintf(name, sizeof name, "l%02d", index);
  r.info.name = name;
  r.info.batch = 1;
  r.info.headsQ = r.info.headsKV = heads;
  r.info.tokensQ = r.info.tokensKV = tokens;
  r.info.headDim = r.info.headDimV = 128;
  r.engine = "synthetic";
  const int nq = int(tokens / 128), nk = int(tokens / 64), n = nq * nk;
  std::mt19937 rng{uint32_t(index)};
  for (int64_t h = 0; h < heads; ++h) {
    core::HeadResult hr;
    hr.head = h;
    hr.nq = nq;
    hr.nk = nk;
    hr.blockMask.resize(size_t(n));
    hr.pvSkipped.resize(size_t(n));
    hr.reasons.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      hr.blockMask[size_t(i)] = uint8_t(rng() % 4 == 0);
      hr.pvSkipped[size_t(i)] = uint8_t(hr.blockMask[size_t(i)] && rng() % 8 == 0);
      hr.reasons[size_t(i)] = uint8_t(hr.blockMask[size_t(i)]);
      hr.sparsity.validBlocks += 1;
      hr.sparsity.selectedBlocks += hr.blockMask[size_t(i)];
    }
    hr.pooledProb.assign(size_t(n), 0.5f);
    hr.refBlockMass.assign(size_t(n), 0.25f);
    hr.qBlockL1.assign(size_t(nq), 0.01f);
    hr.selfSimQ.assign(size_t(nq), 0.9f);
    hr.selfSimK.assign(size_t(nk), 0.9f);
    hr.similarQ.assign(size_t(nq), 1);
    hr.similarK.assign(size_t(nk), 1);
    r.heads.push_back(std::move(hr));
  }
  core::aggregate(r);
  return r;
}

// Receives one message from each other rank (polling, as the job does).
std::vector<std::string> gatherAll(scaleout::Transport& t) {
  std::vector<std::string> got(size_t(t.size()));
  for (int received = 0; received < t.size() - 1;) {
    if (auto m = t.poll()) {
      got[size_t(m->source)] = std::move(m->payload);
      ++received;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return got;
}

void syncAll(scaleout::Transport& t) {  // everyone reports to rank 0, rank 0 answers
  if (t.rank() == 0) {
    gatherAll(t);
    for (int r = 1; r < t.size(); ++r) t.send(r, 2, {});
  } else {
    t.send(0, 2, {});
    while (!t.poll()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  while (!t.sendsDone()) {
  }
}

struct Split {
  double first = 0, second = 0;  // gather: transfer, write; parts: parallel part writes, join
};

// One message per result, as the job sends them; rank 0 decodes each as it arrives.
Split gather(scaleout::Transport& t, const std::vector<core::EntryResult>& mine, const std::string& out,
             int entries) {
  const auto t0 = Clock::now();
  std::vector<core::EntryResult> all{size_t(entries)};
  for (size_t i = 0; i < mine.size(); ++i) {
    const int index = t.rank() + int(i) * t.size();
    if (t.rank() == 0)
      all[size_t(index)] = scaleout::decodeResult(scaleout::encodeResult(mine[i]), "result");
    else
      t.send(0, 100 + index, scaleout::encodeResult(mine[i]));
  }
  if (t.rank() != 0) {
    while (!t.poll()) std::this_thread::sleep_for(std::chrono::microseconds(200));  // rank 0 has them all
    return {};
  }
  for (int received = int(mine.size()); received < entries;) {
    if (auto m = t.poll()) {
      all[size_t(m->tag - 100)] = scaleout::decodeResult(m->payload, "result");
      ++received;
    }
  }
  for (int r = 1; r < t.size(); ++r) t.send(r, 3, {});
  const auto t1 = Clock::now();
  core::writeMasks(out, all);
  return {seconds(t0, t1), seconds(t1, Clock::now())};
}

// Every rank writes its part; then rank 0 joins them by copying (copy) or linking (links).
Split parts(scaleout::Transport& t, const std::vector<core::EntryResult>& mine, const std::string& out,
            bool copy) {
  const auto t0 = Clock::now();
  const std::string part = out + ".part" + std::to_string(t.rank());
  core::writeMasks(part, mine);
  syncAll(t);
  const auto t1 = Clock::now();
  if (t.rank() != 0) return {};
  hid_t f = H5Fcreate(out.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "entries", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (int r = 0; r < t.size(); ++r) {
    const std::string p = out + ".part" + std::to_string(r);
    hid_t src = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t entries = H5Gopen2(src, "entries", H5P_DEFAULT);
    hsize_t n = 0;
    H5Gget_num_objs(entries, &n);
    for (hsize_t i = 0; i < n; ++i) {
      char name[64];
      H5Gget_objname_by_idx(entries, i, name, sizeof name);
      if (copy)
        H5Ocopy(entries, name, g, name, H5P_DEFAULT, H5P_DEFAULT);
      else
        H5Lcreate_external(p.c_str(), ("/entries/" + std::string(name)).c_str(), g, name, H5P_DEFAULT,
                           H5P_DEFAULT);
    }
    H5Gclose(entries);
    H5Fclose(src);
  }
  H5Gclose(g);
  H5Fclose(f);
  return {seconds(t0, t1), seconds(t1, Clock::now())};
}

}  // namespace

int main(int argc, char** argv) {
  auto t = scaleout::openTransport(&argc, &argv);
  const int entries = argc > 1 ? std::atoi(argv[1]) : 28;
  const int64_t heads = argc > 2 ? std::atoll(argv[2]) : 32, tokens = argc > 3 ? std::atoll(argv[3]) : 16384;
  std::vector<core::EntryResult> mine;
  for (int i = t->rank(); i < entries; i += t->size()) mine.push_back(fakeResult(i, heads, tokens));
  const std::string dir = std::filesystem::temp_directory_path() / "sparge_mask_bench";
  std::filesystem::create_directories(dir);
  Split times[3] = {};
  for (int rep = 0; rep < 2; ++rep) {  // the second round is reported (files cached, code warm)
    syncAll(*t);
    times[0] = gather(*t, mine, dir + "/gather.h5", entries);
    syncAll(*t);
    times[1] = parts(*t, mine, dir + "/copy.h5", true);
    syncAll(*t);
    times[2] = parts(*t, mine, dir + "/links.h5", false);
  }
  if (t->rank() == 0) {
    const double mib =
        double(entries) * double(heads) * double(tokens / 128) * double(tokens / 64) * 2 / 1048576;
    std::printf("%d ranks, %d entries x %lld heads x %lld tokens: %.0f MiB of masks\n", t->size(), entries,
                (long long)heads, (long long)tokens, mib);
    std::printf("gather: results to rank 0 %.2f s + rank 0 writes %.2f s = %.2f s\n", times[0].first,
                times[0].second, times[0].first + times[0].second);
    std::printf("parts + copy: ranks write parts %.2f s + rank 0 copies (H5Ocopy) %.2f s = %.2f s\n",
                times[1].first, times[1].second, times[1].first + times[1].second);
    std::printf("parts + links: ranks write parts %.2f s + rank 0 links %.2f s = %.2f s (N+1 files)\n",
                times[2].first, times[2].second, times[2].first + times[2].second);
  }
  syncAll(*t);
  if (t->rank() == 0) std::filesystem::remove_all(dir);
  return 0;
}
