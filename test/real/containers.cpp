// A multi-threaded C++ program using the standard containers, for the
// real-programs test: run.sh builds it with plain g++ (it is NOT linked with
// mimalloc) and runs it once plainly and once with LD_PRELOAD, and the two
// outputs must be identical.
//
// Four threads form a ring: thread i produces Items (strings, vectors,
// shared_ptr payloads) and sends them to thread (i+1)%4 through a
// mutex/condition-variable protected queue, so most objects are allocated in
// one thread and freed in another.  Each thread also keeps a std::map,
// std::unordered_map, std::list and std::deque that grow and shrink, and all
// threads share one read-only table through shared_ptr copies (atomic
// reference counts touched from every thread).  Each inbox has a single
// producer and is FIFO, so what every thread sees, and therefore the
// checksum, does not depend on scheduling.
//
// usage: containers [ITEMS_PER_THREAD]    (default 60000)
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr int kThreads = 4;

struct Rng {  // xorshift64*, deterministic per thread
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  uint64_t next() {
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 1099511628211ULL; }
  return h;
}
uint64_t fnv(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }
uint64_t fnv(uint64_t h, const std::string& s) { return fnv(h, s.data(), s.size()); }

struct Table {  // shared, read-only after construction
  std::vector<std::string> words;
  explicit Table(int n) {
    Rng r(7);
    for (int i = 0; i < n; i++) {
      std::string w;
      int len = 3 + static_cast<int>(r.below(12));
      for (int j = 0; j < len; j++) w.push_back(static_cast<char>('a' + r.below(26)));
      words.push_back(std::move(w));
    }
  }
};

struct Payload {
  std::vector<uint32_t> data;
  std::string label;
};

struct Item {
  uint64_t seq = 0;
  bool last = false;
  std::string name;
  std::vector<int> numbers;
  std::shared_ptr<Payload> payload;
  std::shared_ptr<const Table> table;
};

class Queue {  // unbounded MPSC-style queue (one producer per queue here)
 public:
  void push(std::unique_ptr<Item> it) {
    {
      std::lock_guard<std::mutex> g(m_);
      q_.push_back(std::move(it));
    }
    cv_.notify_one();
  }
  std::unique_ptr<Item> pop() {
    std::unique_lock<std::mutex> g(m_);
    cv_.wait(g, [this] { return !q_.empty(); });
    std::unique_ptr<Item> it = std::move(q_.front());
    q_.pop_front();
    return it;
  }
  bool try_pop(std::unique_ptr<Item>& out) {
    std::lock_guard<std::mutex> g(m_);
    if (q_.empty()) return false;
    out = std::move(q_.front());
    q_.pop_front();
    return true;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Item>> q_;
};

struct Result {
  uint64_t checksum = 14695981039346656037ULL;
  uint64_t received = 0;
  size_t map_size = 0, umap_size = 0, list_size = 0, deque_size = 0;
  uint64_t payload_bytes = 0;
};

class Worker {
 public:
  Worker(int id, uint64_t items, std::shared_ptr<const Table> table, Queue* in, Queue* out)
      : id_(id), items_(items), rng_(static_cast<uint64_t>(id) + 1), table_(std::move(table)), in_(in), out_(out) {}

  void run() {
    bool done = false;  // seen the end marker of our producer?
    for (uint64_t i = 0; i < items_; i++) {
      out_->push(make(i));
      std::unique_ptr<Item> it;
      while (!done && in_->try_pop(it)) {
        if (it->last) done = true; else consume(std::move(it));
      }
    }
    auto end = std::make_unique<Item>();
    end->last = true;
    out_->push(std::move(end));
    while (!done) {  // drain until the producer's end marker
      std::unique_ptr<Item> it = in_->pop();
      if (it->last) done = true; else consume(std::move(it));
    }
    res_.map_size = counts_.size();
    res_.umap_size = groups_.size();
    res_.list_size = recent_.size();
    res_.deque_size = window_.size();
    for (const auto& kv : counts_) res_.checksum = fnv(fnv(res_.checksum, kv.first), kv.second);
    std::map<uint64_t, uint64_t> ordered;  // unordered_map order is not portable: sort first
    for (const auto& kv : groups_) {
      uint64_t h = 0;
      for (const auto& s : kv.second) h = fnv(h, s);
      ordered.emplace(kv.first, h);
    }
    for (const auto& kv : ordered) res_.checksum = fnv(fnv(res_.checksum, kv.first), kv.second);
    for (const auto& s : recent_) res_.checksum = fnv(res_.checksum, s);
    for (uint64_t v : window_) res_.checksum = fnv(res_.checksum, v);
  }

  const Result& result() const { return res_; }

 private:
  std::unique_ptr<Item> make(uint64_t i) {
    auto it = std::make_unique<Item>();
    it->seq = i;
    const std::string& w = table_->words[rng_.below(table_->words.size())];
    it->name = w + "-" + std::to_string(id_) + "-" + std::to_string(i % 1000);
    size_t n = rng_.below(40);
    it->numbers.reserve(n);
    for (size_t k = 0; k < n; k++) it->numbers.push_back(static_cast<int>(rng_.below(100000)));
    if (i % 3 == 0) {  // a payload of varying size, up to ~64 KiB now and then
      auto p = std::make_shared<Payload>();
      size_t sz = (i % 97 == 0) ? 16384 : rng_.below(200);
      p->data.resize(sz);
      for (size_t k = 0; k < sz; k += 7) p->data[k] = static_cast<uint32_t>(i + k);
      p->label = std::string(rng_.below(100), static_cast<char>('A' + i % 26));
      it->payload = std::move(p);
    }
    it->table = table_;
    return it;
  }

  void consume(std::unique_ptr<Item> it) {
    res_.received++;
    uint64_t h = fnv(fnv(14695981039346656037ULL, it->seq), it->name);
    for (int v : it->numbers) h = fnv(h, static_cast<uint64_t>(v));
    counts_[it->name.substr(0, it->name.find('-'))] += 1;
    groups_[h % 4096].push_back(it->name);
    if (groups_[h % 4096].size() > 8) groups_.erase(h % 4096);
    recent_.push_back(it->name + "/" + std::to_string(h % 997));
    if (recent_.size() > 500) recent_.pop_front();
    window_.push_back(h);
    if (window_.size() > 2000) {
      window_.erase(window_.begin(), window_.begin() + 1000);
    }
    if (it->payload) {
      res_.payload_bytes += it->payload->data.size() * sizeof(uint32_t) + it->payload->label.size();
      uint64_t ph = 0;
      for (size_t k = 0; k < it->payload->data.size(); k += 97) ph += it->payload->data[k];
      h = fnv(h, ph);
    }
    if (it->table) h = fnv(h, it->table->words.size());
    res_.checksum = fnv(res_.checksum, h);
    if (res_.received % 5000 == 0) {  // periodically shrink the map
      for (auto p = counts_.begin(); p != counts_.end();) {
        if (p->second < 2) p = counts_.erase(p); else ++p;
      }
    }
  }

  int id_;
  uint64_t items_;
  Rng rng_;
  std::shared_ptr<const Table> table_;
  Queue* in_;
  Queue* out_;
  Result res_;
  std::map<std::string, uint64_t> counts_;
  std::unordered_map<uint64_t, std::vector<std::string>> groups_;
  std::list<std::string> recent_;
  std::deque<uint64_t> window_;
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 60000;
  auto table = std::make_shared<const Table>(5000);
  std::vector<Queue> queues(kThreads);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < kThreads; i++)
    workers.push_back(std::make_unique<Worker>(i, items, table, &queues[i], &queues[(i + 1) % kThreads]));
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->run(); });
  for (auto& t : threads) t.join();
  uint64_t total = 14695981039346656037ULL;
  for (int i = 0; i < kThreads; i++) {
    const Result& r = workers[i]->result();
    std::printf("thread %d: received=%llu map=%zu umap=%zu list=%zu deque=%zu payload_bytes=%llu checksum=%016llx\n", i,
                static_cast<unsigned long long>(r.received), r.map_size, r.umap_size, r.list_size, r.deque_size,
                static_cast<unsigned long long>(r.payload_bytes), static_cast<unsigned long long>(r.checksum));
    total = fnv(total, r.checksum);
  }
  std::printf("table refs after join: %ld\n", table.use_count());
  std::printf("total checksum: %016llx\n", static_cast<unsigned long long>(total));
  return 0;
}
