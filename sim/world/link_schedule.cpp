// SPDX-License-Identifier: Apache-2.0
#include "link_schedule.h"

namespace hcasim::sim {

LinkSchedule::LinkSchedule(const FaultSpec& spec, std::vector<model::Hca*> hcas, bool cable)
    : hcas_(std::move(hcas)),
      cable_(cable),
      down_(hcas_.size(), 0),
      changes_("link.schedule", [this](Change& c) { apply(c); }) {
  for (const LinkDownClause& l : spec.link_downs) {
    if (l.host >= hcas_.size()) continue;  // the spec was checked against these hosts
    // Down from the start: down before any program looks (a timed change at 0 would wait for
    // the first verbs call that lets time run, and a program that never waits would miss it).
    if (l.down_ps <= model::now_ps())
      apply(Change{l.host, false, l.up_ps});
    else
      changes_.push(l.down_ps, Change{l.host, false, l.up_ps});
    if (l.up_ps != LinkDownClause::kForever) changes_.push(l.up_ps, Change{l.host, true, 0});
  }
}

void LinkSchedule::hold(uint32_t host, bool up) {
  uint32_t& n = down_[host];
  if (up && n == 0) return;
  if (up)
    --n;
  else
    ++n;
  if (n == (up ? 0u : 1u)) hcas_[host]->set_link(up);
}

void LinkSchedule::apply(const Change& c) {
  model::Hca& hca = *hcas_[c.host];
  model::Tracer& t = hca.tracer();
  if (t.on() && t.wants(model::TraceUnit::Wire, model::TraceKind::Fault)) {
    if (c.up)
      t.emit(model::TraceUnit::Wire, model::TraceKind::Fault, model::kTraceNone, model::TraceFields(),
             "fault: link up: %s's port carries frames again", hca.identity().name.c_str());
    else if (c.until_ps == LinkDownClause::kForever)
      t.emit(model::TraceUnit::Wire, model::TraceKind::Fault, model::kTraceNone, model::TraceFields(),
             "fault: link down: %s's port loses every frame from now on", hca.identity().name.c_str());
    else
      t.emit(model::TraceUnit::Wire, model::TraceKind::Fault, model::kTraceNone, model::TraceFields(),
             "fault: link down: %s's port loses every frame until %.3f us", hca.identity().name.c_str(),
             double(c.until_ps) / 1e6);
  }
  for (uint32_t h = 0; h < hcas_.size(); ++h)
    if (h == c.host || cable_) hold(h, c.up);
}

}  // namespace hcasim::sim
