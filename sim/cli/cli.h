// SPDX-License-Identifier: Apache-2.0
/**
 * @file cli.h
 * @brief What the hcasim command's parts share: option parsing (options.cpp), starting and
 *        stopping the fabric's device process (device.cpp), and the subcommands `run`
 *        (run.cpp) and `fabric` (fabric.cpp). main() and the help text are in hcasim.cpp.
 */
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace hcasim::cli {

/** @brief Print the help text to @p f. */
void usage(FILE* f);

/** @brief Print "hcasim: " + @p fmt (with up to two string arguments) on stderr; returns 2. */
int fail(const char* fmt, const char* a = "", const char* b = "");

/** @brief True if @p s is a whole number in [@p lo, @p hi]. */
bool parse_uint(const char* s, unsigned long long lo, unsigned long long hi);

/** @brief The directory of this executable (build/bin). */
std::string self_dir();
/** @brief build/lib, where the drop-in library lives, as a real path where possible. */
std::string lib_dir_real();

/** @brief Settings that shape the simulation (they go to whoever holds the world). */
struct SimOptions {
  std::vector<std::pair<std::string, std::string>> env;  ///< HCASIM_* variables to set
  bool step = false;
  std::string step_script;
  uint32_t hosts = 0;  ///< --hosts (0: not given)
  std::string clock;   ///< --clock (empty: not given)
  std::string drops;   ///< every --drop rule, '|'-separated (HCASIM_DROP)
  std::string faults;  ///< every --faults SPEC, ','-joined (HCASIM_FAULTS)
};

/**
 * @brief Parse one simulation option at argv[i] (advancing i past its value). Returns 1 if it
 * was one, 0 if not, or -1 after printing an error.
 */
int parse_sim_option(int argc, char** argv, int& i, SimOptions& o);

/** @brief Options of the cross-process fabric's device process. */
struct FabricOptions {
  std::string socket;
  uint32_t hcas_per_host = 1;
  uint32_t quiet_us = 200;
};

/** @brief Same as parse_sim_option(), for the fabric's options. */
int parse_fabric_option(int argc, char** argv, int& i, FabricOptions& f);

/**
 * @brief Start hcasim-device on @p f.socket for @p hosts hosts; returns its pid once it
 * listens, or -1 (the device's own error is on stderr). @p detach: a daemon in its own
 * session, its output in @p log.
 */
pid_t start_device(const FabricOptions& f, uint32_t hosts, bool detach, const std::string& log);
/** @brief Ask the device at @p path to stop (it writes its outputs first). */
bool stop_device(const std::string& path);

/** @brief hcasim run ARGS (argv after "run"); returns the exit status. */
int cmd_run(int argc, char** argv);
/** @brief hcasim fabric start|stop|status ARGS; returns the exit status. */
int cmd_fabric(int argc, char** argv);

}  // namespace hcasim::cli
