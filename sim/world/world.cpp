// SPDX-License-Identifier: Apache-2.0
#include "world.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "engine.h"
#include "fatal_signals.h"

namespace hcasim::sim {

namespace {
bool env_u64(const char* name, uint64_t& out, uint64_t lo, uint64_t hi, std::string& err) {
  const char* v = std::getenv(name);
  if (!v || !*v) return true;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 0);
  // strtoull takes "-1" (as ULLONG_MAX) and leading blanks: a number here starts with a digit.
  if (!std::isdigit(static_cast<unsigned char>(*v)) || *end || x < lo || x > hi) {
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
  if (*env_str("HCASIM_CLOCK") && !parse_clock_mode(env_str("HCASIM_CLOCK"), c.clock)) {
    err = std::string("HCASIM_CLOCK=") + env_str("HCASIM_CLOCK") + ": expected auto, lockstep or realtime";
    return false;
  }
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
  c.stats_json = env_str("HCASIM_STATS_JSON");
  c.timeline = env_str("HCASIM_TIMELINE");
  c.vcd = env_str("HCASIM_VCD");
  c.pcap = env_str("HCASIM_PCAP");
  uint64_t step = 0;
  if (!env_u64("HCASIM_STEP", step, 0, 1, err)) return false;
  c.step = step != 0;
  c.step_filter = env_str("HCASIM_STEP_FILTER");
  c.step_script = env_str("HCASIM_STEP_SCRIPT");
  uint64_t fd = ~0ull;
  if (*env_str("HCASIM_STEP_FD")) {
    if (!env_u64("HCASIM_STEP_FD", fd, 0, 65535, err)) return false;
    c.step_fd = int(fd);
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < c.hosts; ++i) names.push_back("hcasim" + std::to_string(i));
  std::string ferr;
  if (!TraceFilter().parse(c.trace_filter, ferr, names)) {
    err = "--trace-filter (HCASIM_TRACE_FILTER): " + ferr;
    return false;
  }
  uint64_t explain = c.explain ? 1 : 0;
  if (!env_u64("HCASIM_EXPLAIN", explain, 0, 1, err)) return false;
  c.explain = explain != 0;
  c.drop = env_str("HCASIM_DROP");
  std::vector<DropRule> rules;
  if (!parse_drop_rules(c.drop, rules, ferr, names)) {
    err = "--drop (HCASIM_DROP): " + ferr;
    return false;
  }
  c.faults = env_str("HCASIM_FAULTS");
  if (!FaultSpec().parse(c.faults, ferr, names)) {
    err = "--faults (HCASIM_FAULTS): " + ferr;
    return false;
  }
  if (!TraceFilter().parse(c.step_filter, ferr, names)) {
    err = "--step-filter (HCASIM_STEP_FILTER): " + ferr;
    return false;
  }
  if (c.step && c.clock == ClockMode::Realtime) {
    err =
        "--clock realtime (HCASIM_CLOCK) cannot be combined with step mode: a paused device would "
        "fall behind the wall clock (use --clock lockstep or auto)";
    return false;
  }
  if (c.step) c.clock = ClockMode::Lockstep;  // auto too: pausing needs a device that waits
  return true;
}

/** @brief Interrupts delivered to the in-process driver, any HCA (under the device lock). */
static uint64_t& interrupts_delivered() {
  static uint64_t n = 0;
  return n;
}

/** @brief One simulated HCA offered to the driver. Every entry takes the device lock. */
class SimLink : public drv::HcaLink {
 public:
  /** @param shadow mirror of the IOMMU mappings for step-mode inspection (or nullptr) */
  SimLink(model::Hca& hca, IommuShadow* shadow) : hca_(hca), shadow_(shadow) {}
  const std::string& name() const override { return hca_.identity().name; }
  // Commands and doorbells happen at the current simulated instant; in realtime that is the
  // wall-clock one (sync_to_wall), so the software's time between two of them counts. In
  // realtime a command also takes the firmware's time: the caller sleeps until it is done.
  void exec(hw::CmdMailbox& mb) override {
    Engine& e = Engine::instance();
    e.note_thread();
    const uint64_t issued = Engine::mono_ns();
    uint64_t done = 0;
    {
      Engine::ProgramLock g(e);
      e.note_call();
      e.sync_to_wall(issued);
      hca_.execute(mb);
      if (!Engine::in_kernel_thread()) done = e.command_done_ns(hca_.command_ps());
    }
    wait_until_mono_ns(done);
  }
  void mmio_write64(uint32_t offset, uint64_t value) override {
    Engine& e = Engine::instance();
    e.note_thread();
    const uint64_t rung = Engine::mono_ns();
    bool woke = false, kick;
    {
      Engine::ProgramLock g(e);
      e.note_call();
      e.sync_to_wall(rung);
      hca_.mmio_write(offset, value);
      // Realtime: what the doorbell sets off in the next few microseconds (packets, ACK, CQE,
      // interrupt) happens now, before the program goes on. The simulator is many times slower
      // than the HCA it models; left to the device thread, a completion due 4 us after the
      // doorbell would reach the program tens of microseconds later in wall time, and programs
      // that race their own teardown (Gloo) would lose far more often than on hardware.
      if (e.realtime() && hw::is_sq_doorbell(offset) && !Engine::in_kernel_thread()) {
        const uint64_t seen = interrupts_delivered();
        e.run_ahead(kLeadPs);
        woke = interrupts_delivered() != seen;
      }
      kick = e.kick_needed();
    }
    // An interrupt handler just woke a thread (a completion channel's reader). On hardware it
    // would run at once on a core of its own; on a machine with fewer cores than threads, give
    // it this one now. (A program that only polls gets no interrupts, and keeps its core.)
    if (woke) std::this_thread::yield();
    if (kick) e.kick();
  }
  bool iommu_map(uint64_t iova, void* hva, uint64_t len) override {
    Engine::ProgramLock g(Engine::instance());
    const bool ok = hca_.iommu_map(iova, hva, len);
    if (ok && shadow_) shadow_->map(iova, hva, len);
    return ok;
  }
  void iommu_unmap(uint64_t iova) override {
    Engine::ProgramLock g(Engine::instance());
    hca_.iommu_unmap(iova);
    if (shadow_) shadow_->unmap(iova);
  }
  void set_irq_handler(std::function<void(uint32_t)> isr) override {
    Engine::ProgramLock g(Engine::instance());
    hca_.set_irq_handler([isr = std::move(isr)](uint32_t vector) {
      ++interrupts_delivered();
      isr(vector);
    });
  }
  uint64_t activity_stamp() const override { return Engine::instance().last_call_ns(); }
  bool wait_progress() override {
    Engine& e = Engine::instance();
    e.note_looking();
    e.note_thread();
    e.note_call();
    if (e.realtime()) {
      // The device thread delivers what is due; a waiter only brings it up to now (which also
      // spares a polling program the device thread's wake-up latency) and otherwise lets it run.
      if (e.sync_to_wall()) return true;
      std::this_thread::yield();
      return false;
    }
    uint64_t pace = 0;
    const bool ran = e.run_until_visible(&pace);
    // Held back by pacing: let wall time catch up (up to 1 ms) before the program re-checks.
    if (pace) std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(pace, 1'000'000)));
    return ran || pace;
  }
  int activity_fd() override { return Engine::instance().activity_fd(); }
  void wait_activity(std::vector<pollfd>& fds, int timeout_ms) override {
    Engine::instance().wait_activity(fds, timeout_ms);
  }
  bool trace_on(trace::TraceKind kind) const override {
    const model::Tracer& t = const_cast<model::Hca&>(hca_).tracer();
    return t.on() && t.wants(trace::TraceUnit::Driver, kind);
  }
  void trace(trace::TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id, const trace::TraceFields& f,
             const char* text) override {
    Engine& e = Engine::instance();
    if (e.realtime() && !Engine::in_kernel_thread()) {
      // In order with the posted doorbells, at the instant the program traced, without waiting.
      e.post_work([this, kind, qpn, has_wr, wr_id, f, s = std::string(text)] {
        auto& t = hca_.tracer();
        if (t.on()) t.record(model::TraceUnit::Driver, kind, qpn, has_wr, wr_id, f, s);
      });
      return;
    }
    Engine::ProgramLock g(Engine::instance());
    auto& t = hca_.tracer();
    if (t.on()) t.record(model::TraceUnit::Driver, kind, qpn, has_wr, wr_id, f, text);
  }

 private:
  model::Hca& hca_;
  IommuShadow* shadow_;
};

World::World(const WorldConfig& cfg)
    : cfg_(cfg), prof_(model::find_profile(cfg.profile)), pid_(int(getpid())) {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::vector<std::string> names;
  for (uint32_t i = 0; i < cfg.hosts; ++i) names.push_back("hcasim" + std::to_string(i));
  open_sinks(names);
  // The step controller joins the hub after the HCAs exist (it inspects them).
  const StepIo step_io = cfg.step ? open_step_input() : StepIo{};
  model::TraceSink* sink = hub_.empty() && !step_io.in ? nullptr : &hub_;
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
  if (pcap_) {
    // Every frame once, as its transmission starts: with a cable that is every frame on both
    // directions of the wire; with a switch, each frame on its sender's link.
    for (auto& h : hcas_)
      h->port().set_tap([this](uint64_t t_ps, const model::Packet& p) {
        pcap_->write(t_ps / 1000, p.data, p.len);
        pcap_notes_.captured(p.id, pcap_->packets_written());
      });
  }
  std::string spec_err;
  faults_.parse(cfg.faults, spec_err, names);  // checked by from_env; its drop= clauses go to loss_
  if (!cfg.drop.empty() || step_io.in || !faults_.drops.empty()) {
    std::vector<DropRule> rules;
    std::string err;
    parse_drop_rules(cfg.drop, rules, err, names);  // checked by from_env
    loss_.add(rules);
    loss_.add(faults_.drops);
    std::vector<model::Hca*> raw;
    for (auto& h : hcas_) raw.push_back(h.get());
    loss_.attach(raw);
    if (pcap_) note_drops_in_capture();
  }
  if (step_io.in) open_step(step_io, names);
  net_tracer_.attach(sink, 0);
  wire_up();
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
  // Deregistration hazards: a WRITE into one host's MR may be in flight on any HCA of the world.
  for (auto& h : hcas_)
    h->set_write_probe([this](const model::Hca& target, uint32_t rkey, uint64_t va, uint64_t len,
                              std::vector<model::InflightWrite>& out) {
      for (auto& other : hcas_) other->writes_in_flight_to(target.identity(), rkey, va, len, out);
    });
  for (size_t i = 0; i < hcas_.size(); ++i)
    links_.push_back(std::make_unique<SimLink>(*hcas_[i], i < shadows_.size() ? shadows_[i].get() : nullptr));
  Engine& e = Engine::instance();
  e.on_clock_switch([this](const std::string& why) {
    if (text_ && cfg_.clock == ClockMode::Auto) text_->note("clock: realtime from here (" + why + ")");
    for (auto& h : hcas_) h->set_realtime_clock(true);
  });
  e.set_clock(cfg.clock);
  if (cfg.device_thread) e.start_idle_advancer(cfg.idle_us);
}

uint32_t World::host_with_mac(const uint8_t* mac) const {
  for (uint32_t i = 0; i < hcas_.size(); ++i)
    if (std::memcmp(hcas_[i]->identity().mac, mac, 6) == 0) return i;
  return FaultClause::kAny;
}

void World::wire_up() {
  std::vector<model::WireSide*> wires;  // what each host's port transmits into
  if (cfg_.hosts == 2) {
    cables_.push_back(std::make_unique<CableEnd>(&hcas_[1]->port(), prof_->propagation_ps, net_tracer_));
    cables_.push_back(std::make_unique<CableEnd>(&hcas_[0]->port(), prof_->propagation_ps, net_tracer_));
    wires = {cables_[0].get(), cables_[1].get()};
  } else if (cfg_.hosts > 2) {
    switch_ = std::make_unique<Switch>(*prof_, net_tracer_);
    for (auto& h : hcas_) wires.push_back(switch_->attach(h->port()));
  }
  auto host_of = [this](const uint8_t* mac) { return host_with_mac(mac); };
  if (!faults_.link_downs.empty()) {
    std::vector<model::Hca*> raw;
    for (auto& h : hcas_) raw.push_back(h.get());
    links_schedule_ = std::make_unique<LinkSchedule>(faults_, raw, cfg_.hosts == 2);
  }
  for (uint32_t i = 0; i < wires.size(); ++i) {
    model::WireSide* w = wires[i];
    if (!faults_.clauses.empty() || !faults_.link_downs.empty()) {  // drop= clauses: loss_
      faulty_.push_back(
          std::make_unique<FaultyWire>(faults_, i, *hcas_[i], w, host_of, cfg_.seed, links_schedule_.get()));
      w = faulty_.back().get();
      if (pcap_) note_faults_in_capture(*faulty_.back(), i);
    }
    hcas_[i]->port().attach_wire(w);
  }
}

bool World::open_fault_notes() {
  if (pcap_notes_.is_open() || pcap_notes_.open(cfg_.pcap)) return true;
  std::fprintf(stderr, "hcasim: cannot open %s.faults: %s\n", cfg_.pcap.c_str(), std::strerror(errno));
  return false;
}

void World::note_faults_in_capture(FaultyWire& wire, uint32_t host) {
  if (!open_fault_notes()) return;
  const std::string name = hcas_[host]->identity().name;
  wire.set_observer([this, name](const model::Packet& p, const std::string& what) {
    char summary[256];
    model::describe_frame(p, summary, sizeof summary);
    pcap_notes_.fault(p.id, Engine::instance().now_ps(), name, what, summary);
  });
}

void World::note_drops_in_capture() {
  if (!open_fault_notes()) return;
  for (auto& h : hcas_) {
    const std::string what = "lost at " + h->identity().name + " (scripted drop)";
    h->set_drop_observer([this, what](const model::Packet& p) {
      const uint32_t from = host_with_mac(p.data + 6);  // the frame's source MAC
      const std::string sender = from < hcas_.size() ? hcas_[from]->identity().name : "?";
      char summary[256];
      model::describe_frame(p, summary, sizeof summary);
      pcap_notes_.fault(p.id, Engine::instance().now_ps(), sender, what, summary);
    });
  }
}

std::string World::trace_preamble() const {
  return std::string("# hcasim trace: clock ") + clock_mode_name(cfg_.clock) + " (" +
         clock_mode_summary(cfg_.clock) + "); profile " + cfg_.profile + "; seed " +
         std::to_string(cfg_.seed) + (cfg_.faults.empty() ? "" : "; faults " + cfg_.faults) + "\n";
}

void World::open_sinks(const std::vector<std::string>& names) {
  const model::TimingProfile* prof = prof_;
  auto wire_ps = [prof](uint32_t bytes) { return prof->wire_ps(bytes); };
  if (cfg_.explain) {
    explain_ = std::make_unique<ExplainSink>(stderr, names);
    hub_.add(explain_.get());
  }
  if (!cfg_.trace.empty()) {
    FILE* f = cfg_.trace == "-" ? stderr : std::fopen(cfg_.trace.c_str(), "w");
    if (f) {
      text_ = std::make_unique<TextTraceSink>(f, f != stderr, names, trace_preamble());
      std::string err;
      if (!text_->filter.parse(cfg_.trace_filter, err, names))
        std::fprintf(stderr, "hcasim: %s\n", err.c_str());
      hub_.add(text_.get());
    } else {
      std::fprintf(stderr, "hcasim: cannot open trace file %s: %s\n", cfg_.trace.c_str(),
                   std::strerror(errno));
    }
  }
  if (!cfg_.timeline.empty()) {
    FILE* f = cfg_.timeline == "-" ? stderr : std::fopen(cfg_.timeline.c_str(), "w");
    if (f) {
      if (f != stderr) setvbuf(f, nullptr, _IOFBF, 1 << 20);
      timeline_ = std::make_unique<TimelineSink>(f, f != stderr, names, wire_ps, clock_mode_name(cfg_.clock));
      hub_.add(timeline_.get());
    } else {
      std::fprintf(stderr, "hcasim: cannot open timeline file %s: %s\n", cfg_.timeline.c_str(),
                   std::strerror(errno));
    }
  }
  if (!cfg_.vcd.empty()) {
    vcd_ = std::make_unique<VcdSink>(cfg_.vcd, names, wire_ps);
    if (vcd_->ok()) {
      vcd_->set_time_model(clock_mode_name(cfg_.clock));
      hub_.add(vcd_.get());
    } else {
      std::fprintf(stderr, "hcasim: cannot open VCD file %s: %s\n", cfg_.vcd.c_str(), std::strerror(errno));
      vcd_.reset();
    }
  }
  if (!cfg_.pcap.empty()) {
    pcap_ = std::make_unique<wire::PcapWriter>();
    if (!pcap_->open(cfg_.pcap)) {
      std::fprintf(stderr, "hcasim: cannot open pcap file %s: %s\n", cfg_.pcap.c_str(), std::strerror(errno));
      pcap_.reset();
    }
  }
}

World::StepIo World::open_step_input() const {
  StepIo io;
  if (cfg_.step_fd >= 0) {
    io.in = fdopen(cfg_.step_fd, "r");
  } else {
    const std::string src = cfg_.step_script.empty() ? "/dev/tty" : cfg_.step_script;
    io.in = std::fopen(src.c_str(), "r");
    if (io.in && src == "/dev/tty") {  // interactive: prompts and answers on the terminal too
      if (FILE* o = std::fopen("/dev/tty", "w")) {
        io.out = o;  // left open until exit
        setvbuf(o, nullptr, _IOLBF, 0);
      }
    }
  }
  if (!io.in) {
    std::fprintf(stderr, "hcasim: step mode: cannot read commands from %s: %s (not pausing)\n",
                 cfg_.step_fd >= 0          ? ("descriptor " + std::to_string(cfg_.step_fd)).c_str()
                 : cfg_.step_script.empty() ? "/dev/tty"
                                            : cfg_.step_script.c_str(),
                 std::strerror(errno));
    return io;
  }
  fcntl(fileno(io.in), F_SETFD, FD_CLOEXEC);  // not for the program's children
  return io;
}

void World::open_step(const StepIo& io, const std::vector<std::string>& names) {
  for (size_t i = 0; i < hcas_.size(); ++i) shadows_.push_back(std::make_unique<IommuShadow>());
  std::vector<model::Hca*> hs;
  std::vector<const IommuShadow*> ms;
  for (size_t i = 0; i < hcas_.size(); ++i) {
    hs.push_back(hcas_[i].get());
    ms.push_back(shadows_[i].get());
  }
  inspector_ = std::make_unique<HcaInspector>(hs, ms, [this] { return stats_text(); });
  const bool echo = !isatty(fileno(io.in));  // a script: echo its commands, for a readable transcript
  step_ = std::make_unique<StepController>(io.in, true, io.out, echo, names, inspector_.get());
  std::string err;
  if (!step_->filter.parse(cfg_.step_filter, err, names)) std::fprintf(stderr, "hcasim: %s\n", err.c_str());
  step_->on_drop_next = [this](uint32_t host) { loss_.drop_next(host); };
  hub_.add(step_.get());
  std::fprintf(
      io.out, "hcasim: step mode: pausing at %s; h for help\n",
      cfg_.step_filter.empty() ? "every hardware event" : ("events matching " + cfg_.step_filter).c_str());
  std::fflush(io.out);
}

World::~World() { finish(); }

void World::finish() {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  if (finished_) return;
  finished_ = true;
  hub_.finish();
  if (pcap_) pcap_->close();
  pcap_notes_.close();
}

void World::at_exit() {
  if (int(getpid()) != pid_) return;  // a forked child: the outputs belong to the parent
  auto put = [](const std::string& dest, const std::string& s) {
    FILE* f = dest == "-" ? stderr : std::fopen(dest.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "hcasim: cannot write counters to %s: %s\n", dest.c_str(), std::strerror(errno));
      return;
    }
    std::fputs(s.c_str(), f);
    if (f != stderr) std::fclose(f);
  };
  report_left_behind("the process");
  if (!cfg_.stats.empty()) put(cfg_.stats, stats_text());
  if (!cfg_.stats_json.empty()) put(cfg_.stats_json, stats_json() + "\n");
  finish();
}

void World::report_left_behind(const std::string& who) {
  if (int(getpid()) != pid_) return;  // a forked child: the devices are the parent's
  // Another thread may hold the device lock for a moment (it goes on running while this one
  // handles a fatal signal); one that holds it for good (the dying thread) is not waited for.
  std::unique_lock<std::recursive_mutex> g(Engine::instance().mutex(), std::defer_lock);
  for (int i = 0; i < 1000 && !g.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (!g.owns_lock()) return;
  for (auto& h : hcas_) h->owner_gone_hazards(who);
}

namespace {

/** @brief A fatal signal: say what the process leaves in flight, then die of the signal. */
void on_fatal_signal(int sig) {
  std::signal(sig, SIG_DFL);
  alarm(2);  // should the report block (a lock the dying thread held), SIGALRM ends it
  if (World* w = World::get()) w->report_left_behind("the process (signal " + std::to_string(sig) + ")");
  std::raise(sig);
}

}  // namespace

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

// One X-macro list; the formatter cannot settle on a layout for it.
// clang-format off
#define HCASIM_STAT_FIELDS(X)                                                                         \
  X(doorbells) X(qpc_hits) X(qpc_misses) X(bt_walks) X(bt_cache_hits) X(send_wqes) X(recv_wqes)      \
  X(dma_read_bytes) X(dma_write_bytes) X(tx_packets) X(rx_packets) X(tx_bytes) X(rx_bytes)           \
  X(acks_sent) X(acks_received) X(naks) X(rnr_naks) X(duplicates) X(retransmits) X(cqes)             \
  X(cq_events) X(cq_overflows) X(eqes) X(interrupts) X(rx_dropped) X(iotlb_hits) X(iotlb_misses)     \
  X(hazards) X(unreliable_drops) X(qkey_violations) X(icrc_errors) X(injected_losses)            \
  X(injected_duplicates) X(injected_reorders) X(injected_corruptions) X(injected_delays)   \
  X(link_down_losses) X(link_changes)
// clang-format on

bool stat_by_name(const model::HcaStats& s, const std::string& name, uint64_t& v) {
#define X(f)        \
  if (name == #f) { \
    v = s.f;        \
    return true;    \
  }
  HCASIM_STAT_FIELDS(X)
#undef X
  return false;
}

void drop_rx(model::Hca& hca, uint32_t qpn, uint32_t psn, uint32_t count) {
  hca.drop_rx_if(
      [qpn, psn](const wire::ParsedFrame& f) {
        return (qpn == kMatchAny || f.h.dest_qp == qpn) && (psn == kMatchAny || f.h.psn == psn);
      },
      count);
}

std::string World::stats_text() {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::string out;
  char line[128];
  snprintf(line, sizeof line, "hcasim counters at %.3f us simulated time\n",
           double(Engine::instance().now_ps()) / 1e6);
  out += line;
  out += Engine::instance().clock_report() + "\n";
  for (auto& h : hcas_) {
    const model::HcaStats s = h->stats();
    out += h->identity().name + ":\n";
#define X(f)                                                               \
  snprintf(line, sizeof line, "  %-16s %" PRIu64 "\n", #f, uint64_t(s.f)); \
  out += line;
    HCASIM_STAT_FIELDS(X)
#undef X
  }
  if (stats_tail_) out += stats_tail_();
  return out;
}

std::string World::stats_json() {
  std::lock_guard<std::recursive_mutex> g(Engine::instance().mutex());
  std::string out = "{\"sim_time_ps\":" + std::to_string(Engine::instance().now_ps()) + ",\"clock\":\"" +
                    clock_mode_name(cfg_.clock) +
                    "\",\"realtime\":" + (Engine::instance().realtime() ? "true" : "false") +
                    ",\"devices\":{";
  bool first = true;
  for (auto& h : hcas_) {
    const model::HcaStats s = h->stats();
    out += (first ? "\"" : ",\"") + h->identity().name + "\":{";
    first = false;
    bool f1 = true;
#define X(f)                                                                            \
  out += (f1 ? "\"" : ",\"") + std::string(#f) + "\":" + std::to_string(uint64_t(s.f)); \
  f1 = false;
    HCASIM_STAT_FIELDS(X)
#undef X
    out += "}";
  }
  // Per QP: the running state of every live QP (cheap: read from the contexts, nothing is
  // counted on the data path). Counters wrap: SQ indices at 16 bits, PSNs at 24.
  out += "},\"qps\":{";
  first = true;
  for (auto& h : hcas_) {
    out += (first ? "\"" : ",\"") + h->identity().name + "\":[";
    first = false;
    std::vector<const model::QpContext*> qps;
    h->core().qpc.for_each([&](const model::QpContext& q) { qps.push_back(&q); });
    std::sort(qps.begin(), qps.end(), [](auto* a, auto* b) { return a->qpc.qpn < b->qpc.qpn; });
    bool f1 = true;
    for (const model::QpContext* q : qps) {
      static const char* const st[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
      char b[512];
      snprintf(b, sizeof b,
               "%s{\"qpn\":%u,\"state\":\"%s\",\"dest_qpn\":%u,\"sq_pi\":%u,\"sq_fetch\":%u,\"inflight\":%zu,"
               "\"next_psn\":%u,\"rq_ci\":%u,\"rq_pi_seen\":%u,\"epsn\":%u,\"msn\":%u,\"qpc_cached\":%s}",
               f1 ? "" : ",", q->qpc.qpn, q->qpc.state < 7 ? st[q->qpc.state] : "?", q->qpc.dest_qpn,
               q->sq_pi, q->sq_fetch, q->inflight.size(), q->next_psn, q->rq_ci, q->rq_pi_seen, q->epsn,
               q->msn, h->core().qpc.is_cached(q->qpc.qpn) ? "true" : "false");
      out += b;
      f1 = false;
    }
    out += "]";
  }
  return out + "}}";
}

World* World::get() {
  static World* w = []() -> World* {
    WorldConfig cfg;
    std::string err;
    if (!WorldConfig::from_env(cfg, err)) {
      std::fprintf(stderr, "hcasim: %s\n", err.c_str());
      return nullptr;
    }
    auto* world = new World(cfg);  // lives until exit: programs may be in verbs from other threads
    // Registered after the engine's own handler (which locks the kernel for good), so it runs first.
    std::atexit([] { World::get()->at_exit(); });
    // A program that aborts (Gloo's teardown race) still says what it left in flight.
    on_fatal_signals(on_fatal_signal);
    return world;
  }();
  return w;
}

}  // namespace hcasim::sim
