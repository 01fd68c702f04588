// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the address record verbs/ pairs exchange through a store (verbs/address.h), which
// comes from another process, a file or a Redis server: any bytes at all. Properties: bad bytes
// are refused with an AddressError naming a field, never another exception or a crash; bytes
// that are accepted are canonical: encoding the decoded address gives them back exactly.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "hcasim/verbs/address.h"
#include "hcasim/verbs/error.h"

using namespace hcasim::verbs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> in(data, data + size);
  Address a;
  try {
    a = Address::fromBytes(in.data(), in.size());
  } catch (const AddressError& e) {
    FUZZ_CHECK(!e.field().empty() && std::strlen(e.what()) > 0, "an AddressError that names nothing");
    return 0;
  }
  const std::vector<uint8_t> out = a.bytes();
  FUZZ_CHECK(out == in, "accepted %zu bytes that do not encode back to themselves", size);
  return 0;
}
