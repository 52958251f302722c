#include "parallel/host_collectives.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.h"
#include "parallel/bounded_wait.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"

namespace pt::parallel {

namespace {
void wait(MPI_Request* req, const char* op) {
  bounded_wait(
      [&] {
        int flag = 0;
        PT_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        return flag != 0;
      },
      [&](double s) { comm_fatal(op, "not complete after " + std::to_string(static_cast<int>(s)) + " s"); });
}
// Every rank's bytes on rank 0 (MPI_Gatherv after gathering the lengths).
std::vector<std::vector<char>> gather_bytes(const std::vector<char>& mine) {
  int rank = 0, world = 1;
  PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  PT_CHECK(mine.size() <= static_cast<size_t>(INT_MAX), "gather_to_root: more than 2 GiB from one rank");
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(rank == 0 ? world : 0), displs(counts.size());
  MPI_Request req;
  PT_MPI_CHECK(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
  wait(&req, "host gather of benchmark record lengths");
  int64_t total = 0;
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  PT_CHECK(total <= INT_MAX, "gather_to_root: more than 2 GiB in all");
  std::vector<char> all(static_cast<size_t>(total));
  PT_MPI_CHECK(MPI_Igatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, 0,
                            MPI_COMM_WORLD, &req));
  wait(&req, "host gather of benchmark records");
  std::vector<std::vector<char>> out;
  for (int r = 0; r < static_cast<int>(counts.size()); ++r)
    out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
  return out;
}

}  // namespace

std::vector<std::string> all_gather_strings(const std::string& mine) {
  int init = 0, fin = 0;
  PT_MPI_CHECK(MPI_Initialized(&init));
  PT_MPI_CHECK(MPI_Finalized(&fin));
  if (!init || fin) return {mine};
  int world = 1;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  // Lengths first, then the text: any length (an options listing runs to kilobytes).
  PT_CHECK(mine.size() < size_t(INT32_MAX), "host all-gather: a string of " + std::to_string(mine.size()) + " bytes");
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(world)), offsets(static_cast<size_t>(world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  wait(&req, "host all-gather of string lengths");
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    offsets[size_t(r)] = static_cast<int>(total);
    total += lens[size_t(r)];
  }
  PT_CHECK(total < INT32_MAX, "host all-gather: " + std::to_string(total) + " bytes over all ranks");
  std::vector<char> recv(static_cast<size_t>(total) + 1, '\0');
  PT_MPI_CHECK(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, recv.data(), lens.data(), offsets.data(), MPI_CHAR,
                               MPI_COMM_WORLD, &req));
  wait(&req, "host all-gather of strings");
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) out.emplace_back(recv.data() + offsets[size_t(r)], size_t(lens[size_t(r)]));
  return out;
}

std::vector<double> all_gather_values(double v) {
  int world = 1;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  std::vector<double> all(static_cast<size_t>(world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallgather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD, &req));
  wait(&req, "host all-gather of benchmark values");
  return all;
}

int64_t sum_over_ranks(int64_t v) {
  int64_t sum = 0;
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &req));
  wait(&req, "host sum of benchmark counts");
  return sum;
}

std::vector<double> sum_over_ranks(const std::vector<double>& v) {
  std::vector<double> sum(v.size());
  MPI_Request req;
  PT_MPI_CHECK(
      MPI_Iallreduce(v.data(), sum.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
  wait(&req, "host sum over ranks");
  return sum;
}

RankSpread spread_over_ranks(double v) {
  const auto all = all_gather_values(v);
  RankSpread s;
  s.mean = std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
  s.max = *std::max_element(all.begin(), all.end());
  s.min = *std::min_element(all.begin(), all.end());
  return s;
}

std::vector<std::vector<double>> gather_to_root(const std::vector<double>& mine) {
  const char* p = reinterpret_cast<const char*>(mine.data());
  std::vector<std::vector<double>> out;
  for (const auto& bytes : gather_bytes(std::vector<char>(p, p + mine.size() * sizeof(double)))) {
    out.emplace_back(bytes.size() / sizeof(double));
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(out.back().data()));
  }
  return out;
}

std::vector<std::vector<std::string>> gather_to_root(const std::vector<std::string>& mine) {
  // Each string followed by a NUL: the lengths travel inside the bytes.
  std::vector<char> packed;
  for (const auto& s : mine) {
    PT_CHECK(s.find('\0') == std::string::npos, "gather_to_root: a string contains a NUL byte");
    packed.insert(packed.end(), s.begin(), s.end());
    packed.push_back('\0');
  }
  std::vector<std::vector<std::string>> out;
  for (const auto& bytes : gather_bytes(packed)) {
    out.emplace_back();
    auto it = bytes.begin();
    while (it != bytes.end()) {
      auto nul = std::find(it, bytes.end(), '\0');
      out.back().emplace_back(it, nul);
      it = nul == bytes.end() ? nul : nul + 1;
    }
  }
  return out;
}

void gather_pieces_to_root(std::vector<char>& whole, const std::vector<BytePiece>& mine, int64_t max_message) {
  int init = 0, fin = 0, rank = 0, world = 1;
  PT_MPI_CHECK(MPI_Initialized(&init));
  PT_MPI_CHECK(MPI_Finalized(&fin));
  if (init && !fin) {
    PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  }
  auto place = [&](int64_t offset, int64_t bytes) {
    PT_CHECK(offset >= 0 && bytes >= 0 && offset + bytes <= static_cast<int64_t>(whole.size()),
             "gather_pieces_to_root: a piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                 ") lies outside the " + std::to_string(whole.size()) + "-byte buffer");
    return whole.data() + offset;
  };
  if (rank == 0)
    for (const BytePiece& p : mine)
      if (p.bytes > 0) std::memcpy(place(p.offset, p.bytes), p.data, static_cast<size_t>(p.bytes));
  if (world == 1) return;
  // Where every rank's pieces go (offset, bytes as doubles: exact below 2^53), then the bytes.
  std::vector<double> layout;
  for (const BytePiece& p : mine) {
    layout.push_back(static_cast<double>(p.offset));
    layout.push_back(static_cast<double>(p.bytes));
  }
  const auto layouts = gather_to_root(layout);
  PT_CHECK(max_message >= 1 && max_message <= INT_MAX, "gather_pieces_to_root: message size out of range");
  std::vector<MPI_Request> reqs;
  int tag = 0;
  auto post = [&](bool send, void* buf, int64_t bytes, int peer) {
    for (int64_t done = 0; done < bytes; done += max_message) {
      const int n = static_cast<int>(std::min(max_message, bytes - done));
      MPI_Request r;
      if (send)
        PT_MPI_CHECK(MPI_Isend(static_cast<char*>(buf) + done, n, MPI_BYTE, peer, tag++, MPI_COMM_WORLD, &r));
      else
        PT_MPI_CHECK(MPI_Irecv(static_cast<char*>(buf) + done, n, MPI_BYTE, peer, tag++, MPI_COMM_WORLD, &r));
      reqs.push_back(r);
    }
  };
  if (rank == 0) {
    for (int r = 1; r < world; ++r) {
      tag = 0;  // tags count each sender's messages in its own order
      const auto& l = layouts[size_t(r)];
      for (size_t i = 0; i + 1 < l.size(); i += 2) {
        const auto offset = static_cast<int64_t>(l[i]), bytes = static_cast<int64_t>(l[i + 1]);
        post(false, place(offset, bytes), bytes, r);
      }
    }
  } else {
    for (const BytePiece& p : mine) post(true, const_cast<void*>(p.data), p.bytes, 0);
  }
  bounded_wait(
      [&] {
        int flag = 0;
        PT_MPI_CHECK(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE));
        return flag != 0;
      },
      [&](double s) {
        comm_fatal("host gather of optimizer state to rank 0",
                   "not complete after " + std::to_string(static_cast<int>(s)) + " s");
      });
}

void check_same_on_every_rank(const std::string& value, const std::string& what) {
  if (Runtime::get().world_size() <= 1) return;
  const std::vector<std::string> all = all_gather_strings(value);
  for (size_t r = 1; r < all.size(); ++r)
    PT_CHECK(all[r] == all[0],
             what + " differs between ranks: rank 0 has " + all[0] + ", rank " + std::to_string(r) + " has " + all[r]);
}

}  // namespace pt::parallel
