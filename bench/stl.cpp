/* ----------------------------------------------------------------------------
  stl.cpp -- C++ containers in one thread: new/delete of many small objects.

  A typical C++ program allocates through the standard containers: strings
  longer than the small-string buffer, tree nodes of std::map, the bucket
  arrays and nodes of std::unordered_map, vectors that grow by doubling,
  list nodes, shared_ptr control blocks. Each round of this program builds an
  index of random words (map of word -> vector of positions), a hash map of
  ids to names, a bounded queue of shared objects that drops its oldest, erases
  ranges of the index as it goes, then sorts a copy of the keys and drops
  everything. Every allocation goes through operator new/delete, so under
  LD_PRELOAD this measures the allocator's C++ entry points.

  usage: stl [rounds=40] [words=20000]
  prints: rounds per second and a check value (the same under every allocator).
-----------------------------------------------------------------------------*/
#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench.h"

namespace {

struct Record {
  std::string name;
  std::vector<uint32_t> fields;
  std::shared_ptr<Record> parent;
};

std::string random_word(bench_rng_t* rng) {
  // 4..40 characters: about two thirds outgrow the small-string buffer
  const size_t len = bench_range(rng, 4, 40);
  std::string s;
  for (size_t i = 0; i < len; i++) s.push_back((char)('a' + bench_below(rng, 26)));
  return s;
}

uint64_t one_round(bench_rng_t* rng, size_t words) {
  std::map<std::string, std::vector<uint32_t>> index;
  std::unordered_map<uint64_t, std::string> names;
  std::list<std::shared_ptr<Record>> recent;
  std::shared_ptr<Record> last;
  uint64_t check = 0;

  for (size_t i = 0; i < words; i++) {
    std::string w = random_word(rng);
    index[w.substr(0, 3 + i % 5)].push_back((uint32_t)i);   // short keys repeat: vectors grow
    names.emplace(bench_rand(rng), w + "#" + std::to_string(i));

    auto rec = std::make_shared<Record>();
    rec->name = w;
    rec->fields.resize(bench_range(rng, 0, 24), (uint32_t)i);
    rec->parent = last;
    last = rec;
    recent.push_back(std::move(rec));
    if (recent.size() > 512) {
      recent.front()->parent.reset();
      recent.pop_front();
    }

    if (i % 64 == 63) {   // erase a few neighbouring keys
      auto it = index.lower_bound(random_word(rng));
      for (int k = 0; k < 4 && it != index.end(); k++) {
        check = bench_hash(check, it->second.size());
        it = index.erase(it);
      }
    }
    if (i % 16 == 15 && !names.empty()) names.erase(names.begin());
  }

  std::vector<std::string> keys;
  keys.reserve(index.size());
  for (const auto& kv : index) keys.push_back(kv.first + ":" + std::to_string(kv.second.size()));
  std::sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  for (const auto& k : keys) check = bench_hash(check, k.size() * 131 + (uint8_t)k[0]);
  check = bench_hash(check, names.size());
  // break the parent chain iteratively (a deep chain would recurse on destruction)
  last.reset();
  for (auto& r : recent) r->parent.reset();
  return check;
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = bench_arg(argc, argv, 1, 40);
  const long words = bench_arg(argc, argv, 2, 20000);
  bench_rng_t rng;
  bench_rng_init(&rng, 11);
  uint64_t check = 0;
  const double start = bench_now();
  for (long r = 0; r < rounds; r++) check = bench_hash(check, one_round(&rng, (size_t)words));
  const double secs = bench_now() - start;
  printf("stl: %ld rounds x %ld words, %.2f rounds/s check=%016llx\n", rounds, words,
         (double)rounds / secs, (unsigned long long)check);
  return 0;
}
