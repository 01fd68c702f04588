// SPDX-License-Identifier: Apache-2.0
/**
 * @file fatal_signals.h
 * @brief Have a report run when the process dies of SIGABRT, SIGSEGV or SIGBUS (what a program
 *        leaves in flight, docs/reading-a-trace.md "Hazards"), without taking over the signals
 *        a program handles itself.
 */
#pragma once

#include <csignal>

namespace hcasim::sim {

/**
 * @brief Install @p handler for each fatal signal whose disposition is still the default. The
 * handler should reset the signal to SIG_DFL and raise it again once it has reported.
 */
inline void on_fatal_signals(void (*handler)(int)) {
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      std::signal(sig, handler);
  }
}

}  // namespace hcasim::sim
