// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: step mode's command interpreter (sim/world/step_mode.h), the lines a user types
// at the (step) prompt or puts in a --step-script file. Input: a script (any bytes); the
// controller pauses on a stream of events of every unit and kind and reads its commands from it.
// Properties: it never crashes or loops forever (each command either resumes or reads the next
// line; the input ends); the model is asked about hosts that exist only; `drop next` names an
// existing host or any; once the script is exhausted the controller stops pausing.
//
// The model here is a stand-in: print commands ask it for text and get the arguments back, so
// the harness checks what the interpreter asks for, not what a model answers (that is the step
// mode's e2e tests' job: tests/trace).
#include <cstdio>
#include <string>
#include <vector>

#include "drop_rule.h"
#include "fuzz_check.h"
#include "step_mode.h"

using namespace hcasim;
using namespace hcasim::sim;

namespace {

const std::vector<std::string> kHosts = {"hcasim0", "hcasim1", "hcasim2"};

/** Answers every question with its arguments, after checking the host exists. */
class ArgumentsInspector : public ModelInspector {
 public:
  std::string qp(uint32_t host, uint32_t qpn) override { return ask("qp", host, qpn); }
  std::string bt(uint32_t host, uint32_t qpn) override { return ask("bt", host, qpn); }
  std::string cq(uint32_t host, uint32_t cqn) override { return ask("cq", host, cqn); }
  std::string srq(uint32_t host, uint32_t srqn) override { return ask("srq", host, srqn); }
  std::string eq(uint32_t host, uint32_t eqn) override { return ask("eq", host, eqn); }
  std::string mr(uint32_t host, uint32_t key) override { return ask("mr", host, key); }
  std::string raw(uint32_t host, const std::string& what, uint32_t queue, uint32_t index) override {
    FUZZ_CHECK(what == "wqe" || what == "rwqe" || what == "cqe" || what == "eqe", "x of '%s'", what.c_str());
    return ask(what.c_str(), host, queue) + " " + std::to_string(index);
  }
  std::string stats() override { return "stats\n"; }

 private:
  static std::string ask(const char* what, uint32_t host, uint32_t n) {
    FUZZ_CHECK(host < kHosts.size(), "%s asked of host %u (there are %zu)", what, host, kHosts.size());
    return std::string(what) + " " + std::to_string(host) + " " + std::to_string(n) + "\n";
  }
};

/** Event @p i of an endless, varied stream: every unit and kind in turn, on every host. */
model::TraceEvent event(uint32_t i) {
  model::TraceEvent ev;
  ev.time_ps = uint64_t(i) * 1000;
  ev.host = i % kHosts.size();
  ev.unit = model::TraceUnit(i % uint32_t(model::TraceUnit::Count));
  ev.kind = model::TraceKind(i * 7 % uint32_t(model::TraceKind::Count));
  ev.qpn = i % 5 == 0 ? model::kTraceNone : 0x11 + (i % 3) * 0x10000;
  ev.text = "event " + std::to_string(i);
  return ev;
}

}  // namespace

// libsystemc references sc_main; this harness never starts a simulation.
extern "C" int sc_main(int, char**) { return 1; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* in = fmemopen(const_cast<uint8_t*>(data), size, "r");
  if (!in) return 0;  // size 0: nothing to read (fmemopen refuses an empty buffer)
  FILE* out = std::fopen("/dev/null", "w");
  FUZZ_CHECK(out != nullptr, "cannot open /dev/null");
  ArgumentsInspector insp;
  StepController step(in, true, out, true, kHosts, &insp);
  step.on_drop_next = [](uint32_t host) {
    FUZZ_CHECK(host == DropRule::kAny || host < kHosts.size(), "drop next on host %u", host);
  };
  // Each pause reads at least one line, so a script of N lines is done within N pauses; the
  // events that do not pause (skipped by `c N` or `n WHAT`) are bounded here.
  const uint32_t budget = uint32_t(size) * 64 + 64;
  for (uint32_t i = 0; i < budget && step.active(); ++i) step.record(event(i));
  // Every pause but the last reads at least one line (the last may meet the end of the script).
  size_t lines = 1;
  for (size_t i = 0; i < size; ++i) lines += data[i] == '\n';
  FUZZ_CHECK(step.pauses() <= lines + 1, "%llu pauses from a %zu-line script",
             (unsigned long long)step.pauses(), lines);
  step.finish();
  std::fclose(out);
  return 0;
}
