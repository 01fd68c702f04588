// SPDX-License-Identifier: Apache-2.0
#include "world.h"

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine.h"

namespace hcasim::sim {

namespace {
bool env_u64(const char* name, uint64_t& out, uint64_t lo, uint64_t hi, std::string& err) {
  const char* v = std::getenv(name);
  if (!v || !*v) return true;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 0);
  if (*end || x < lo || x > hi) {
    err = std::string(name) + "=" + v + ": expected a number from " + std::to_string(lo) + " to " +
          std::to_string(hi);
    return false;
  }
  out = x;
  return true;
}
const char* env_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

bool WorldConfig::from_env(WorldConfig& c, std::string& err) {
  uint64_t v = c.hosts;
  if (!env_u64("HCASIM_HOSTS", v, 1, 64, err)) return false;
  c.hosts = uint32_t(v);
  v = c.idle_us;
  if (!env_u64("HCASIM_IDLE_US", v, 0, 10'000'000, err)) return false;
  c.idle_us = uint32_t(v);
  if (!env_u64("HCASIM_SEED", c.seed, 0, ~0ull, err)) return false;
  if (*env_str("HCASIM_PROFILE")) c.profile = env_str("HCASIM_PROFILE");
  if (!model::find_profile(c.profile)) {
    err = "HCASIM_PROFILE=" + c.profile + ": unknown profile (known:";
    for (auto& n : model::profile_names()) err += " " + n;
    err += ")";
    return false;
  }
  c.trace = env_str("HCASIM_TRACE");
  c.trace_filter = env_str("HCASIM_TRACE_FILTER");
  c.stats = env_str("HCASIM_STATS");
  return true;
}

/** @brief One simulated HCA offered to the driver. Every entry takes the device lock. */
class SimLink : public drv::HcaLink {
 public:
  explicit SimLink(model::Hca& hca) : hca_(hca) {}
  const std::string& name() const override { return hca_.identity().name; }
  void exec(hw::CmdMailbox& mb) override {
    std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
    Engine::instance().note_call();
    hca_.execute(mb);
  }
  void mmio_write64(uint32_t offset, uint64_t value) override {
    Engine& e = Engine::instance();
    {
      std::lock_guard<std::recursive_mutex> g(e.mutex());
      e.note_call();
      hca_.mmio_write(offset, value);
    }
    e.kick();
  }
  bool iommu_map(uint64_t iova, void* hva, uint64_t len) override {
    std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
    return hca_.iommu_map(iova, hva, len);
  }
  void iommu_unmap(uint64_t iova) override {
    std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
    hca_.iommu_unmap(iova);
  }
  void set_irq_handler(std::function<void(uint32_t)> isr) override {
    std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
    hca_.set_irq_handler(std::move(isr));
  }
  bool wait_progress() override {
    Engine& e = Engine::instance();
    e.note_call();
    return e.run_until_visible();
  }
  int activity_fd() override { return Engine::instance().activity_fd(); }
  bool trace_on() const override { return const_cast<model::Hca&>(hca_).tracer().on(); }
  void trace(uint32_t qpn, bool has_wr, uint64_t wr_id, const char* text, TraceWhat what) override {
    std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
    auto& t = hca_.tracer();
    if (!t.on()) return;
    const auto kind = what == TraceWhat::Interrupt ? model::TraceKind::Interrupt : model::TraceKind::Post;
    if (has_wr)
      t.emit_wr(model::TraceUnit::Driver, kind, qpn, wr_id, "%s", text);
    else
      t.emit(model::TraceUnit::Driver, kind, qpn, "%s", text);
  }

 private:
  model::Hca& hca_;
};

World::World(const WorldConfig& cfg) : cfg_(cfg), prof_(model::find_profile(cfg.profile)) {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::vector<std::string> names;
  for (uint32_t i = 0; i < cfg.hosts; ++i) names.push_back("hcasim" + std::to_string(i));
  if (!cfg.trace.empty()) {
    FILE* f = cfg.trace == "-" ? stderr : std::fopen(cfg.trace.c_str(), "w");
    if (f) {
      text_ = std::make_unique<TextTraceSink>(f, f != stderr, names);
      std::string err;
      if (!text_->filter.parse(cfg.trace_filter, err)) std::fprintf(stderr, "hcasim: %s\n", err.c_str());
      hub_.add(text_.get());
    } else {
      std::fprintf(stderr, "hcasim: cannot open trace file %s: %s\n", cfg.trace.c_str(), std::strerror(errno));
    }
  }
  model::TraceSink* sink = hub_.empty() ? nullptr : &hub_;
  for (uint32_t i = 0; i < cfg.hosts; ++i) {
    model::HcaIdentity id;
    id.name = names[i];
    id.index = i;
    const uint8_t mac[6] = {0x02, 0x48, 0x43, 0x41, uint8_t((i + 1) >> 8), uint8_t(i + 1)};
    std::memcpy(id.mac, mac, 6);
    id.node_guid = 0x024843fffe410000ull + i + 1;
    id.ipv4 = (192u << 24) | (0u << 16) | (2u << 8) | (i + 1);  // 192.0.2.0/24: simulated only
    model::derive_gids(id);
    hcas_.push_back(std::make_unique<model::Hca>(*prof_, id, sink));
  }
  wire_tracer_.attach(sink, 0);
  // Two hosts: a cable; more: a switch.
  if (cfg.hosts == 2) {
    cables_.push_back(std::make_unique<CableEnd>(&hcas_[1]->port(), prof_->propagation_ps, wire_tracer_));
    cables_.push_back(std::make_unique<CableEnd>(&hcas_[0]->port(), prof_->propagation_ps, wire_tracer_));
    hcas_[0]->port().attach_wire(cables_[0].get());
    hcas_[1]->port().attach_wire(cables_[1].get());
  } else if (cfg.hosts > 2) {
    switch_ = std::make_unique<Switch>(*prof_, wire_tracer_);
    for (auto& h : hcas_) h->port().attach_wire(switch_->attach(h->port()));
  }
  // Neighbour table: every host's GIDs resolve to its MAC.
  for (auto& h : hcas_) {
    h->set_resolver([this](const uint8_t gid[16], uint8_t mac[6]) {
      for (auto& other : hcas_)
        for (auto& g : other->identity().gid)
          if (std::memcmp(g, gid, 16) == 0) {
            std::memcpy(mac, other->identity().mac, 6);
            return true;
          }
      return false;
    });
  }
  for (auto& h : hcas_) links_.push_back(std::make_unique<SimLink>(*h));
  Engine::instance().start_idle_advancer(cfg.idle_us);
}

World::~World() = default;

model::Hca* World::find(const std::string& name) {
  for (auto& h : hcas_)
    if (h->identity().name == name) return h.get();
  return nullptr;
}

std::vector<drv::HcaLink*> World::links() {
  std::vector<drv::HcaLink*> v;
  for (auto& l : links_) v.push_back(l.get());
  return v;
}

#define HCASIM_STAT_FIELDS(X)                                                                         \
  X(doorbells) X(qpc_hits) X(qpc_misses) X(bt_walks) X(bt_cache_hits) X(wqes) X(dma_read_bytes)       \
  X(dma_write_bytes) X(tx_packets) X(rx_packets) X(tx_bytes) X(rx_bytes) X(acks) X(naks) X(rnr_naks) \
  X(duplicates) X(retransmits) X(cqes) X(cq_events) X(cq_overflows) X(eqes) X(interrupts)            \
  X(rx_dropped) X(iotlb_hits) X(iotlb_misses)

bool stat_by_name(const model::HcaStats& s, const std::string& name, uint64_t& v) {
#define X(f)         \
  if (name == #f) {  \
    v = s.f;         \
    return true;     \
  }
  HCASIM_STAT_FIELDS(X)
#undef X
  return false;
}

std::string World::stats_text() {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::string out;
  char line[128];
  snprintf(line, sizeof line, "hcasim counters at %.3f us simulated time\n", double(Engine::instance().now_ps()) / 1e6);
  out += line;
  for (auto& h : hcas_) {
    const model::HcaStats s = h->stats();
    out += h->identity().name + ":\n";
#define X(f)                                                         \
  snprintf(line, sizeof line, "  %-16s %" PRIu64 "\n", #f, uint64_t(s.f)); \
  out += line;
    HCASIM_STAT_FIELDS(X)
#undef X
  }
  return out;
}

std::string World::stats_json() {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::string out = "{\"sim_time_ps\":" + std::to_string(Engine::instance().now_ps()) + ",\"devices\":{";
  bool first = true;
  for (auto& h : hcas_) {
    const model::HcaStats s = h->stats();
    out += (first ? "\"" : ",\"") + h->identity().name + "\":{";
    first = false;
    bool f1 = true;
#define X(f)                                                           \
  out += (f1 ? "\"" : ",\"") + std::string(#f) + "\":" + std::to_string(uint64_t(s.f)); \
  f1 = false;
    HCASIM_STAT_FIELDS(X)
#undef X
    out += "}";
  }
  return out + "}}";
}

World* World::get() {
  static World* w = [] () -> World* {
    WorldConfig cfg;
    std::string err;
    if (!WorldConfig::from_env(cfg, err)) {
      std::fprintf(stderr, "hcasim: %s\n", err.c_str());
      return nullptr;
    }
    auto* world = new World(cfg);  // lives until exit: programs may be in verbs from other threads
    if (!cfg.stats.empty()) {
      std::atexit([] {
        World* wd = World::get();
        std::string s = wd->stats_text();
        FILE* f = wd->config().stats == "-" ? stderr : std::fopen(wd->config().stats.c_str(), "w");
        if (!f) return;
        std::fputs(s.c_str(), f);
        if (f != stderr) std::fclose(f);
      });
    }
    return world;
  }();
  return w;
}

}  // namespace hcasim::sim
