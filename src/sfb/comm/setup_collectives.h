#pragma once
// Collectives as free functions over Transport&, on kTagCollective. They run outside the
// training loop (before the worker threads start, after they stop); messages of other tags that
// arrive meanwhile are stashed by the transport, never dropped.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/comm/transport.h"

namespace sfb::comm {

// Every rank's value, in rank order, on every rank.
std::vector<int64_t> allgather_i64(Transport& t, int64_t value);
// Rank `root`'s bytes on every rank (the argument is ignored elsewhere).
Bytes broadcast_bytes(Transport& t, int root, std::span<const std::byte> data);
// Throws InvalidArgument on every rank when the ranks disagree on `value`; the message names
// `what` and the ranks whose value differs from rank 0's.
void check_all_equal(Transport& t, uint64_t value, const std::string& what);
// The same check on every rank's value gathered some other way (before a Transport exists).
void check_values_equal(std::span<const int64_t> all, const std::string& what);

}  // namespace sfb::comm
