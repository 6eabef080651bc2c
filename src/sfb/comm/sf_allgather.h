#pragma once
// All-gather of sufficient-factor batches, for the CNN executor's factor groups (MG-WFBP's hybrid
// transport): every rank sends its batches as one message (encode_sf_batches, the SFB engine's
// wire codec) to every other rank on kTagSf and receives theirs. The result is every rank's
// batches in rank order, this rank's own included as given, so every rank rebuilds a gradient from
// identical data in identical order. Bytes per rank: (P - 1) x the message, as a ring all-gather.
// The batches' clock field carries the call's id (checked); messages of later calls that arrive
// early are stashed per source.
//
// Threads: the caller must be the only thread receiving on `t` while it runs.
#include <cstdint>
#include <vector>

#include "sfb/comm/source_stash.h"
#include "sfb/comm/transport.h"
#include "sfb/core/sf_batch.h"

namespace sfb::comm {

class SfAllgather {
 public:
  // Over every rank of the channel's transport (kTagSf in the CNN executor).
  explicit SfAllgather(Channel& ch) : ch_(ch), stash_(ch) {}
  // `mine`: this rank's batches (every rank passes the same number, batch i of the same J and D on
  // every rank; counts may differ); their sender and clock are set here. Returns all[r][i]: rank
  // r's batch i.
  std::vector<std::vector<SfBatch>> run(std::vector<SfBatch> mine, int64_t id);

 private:
  Channel& ch_;
  SourceStash stash_;  // messages of later calls, per source
};

}  // namespace sfb::comm
