#pragma once
// Loads the training partition of one rank and (optionally) the test set, as the config says:
// IDX, libsvm or synthetic, with the bias feature appended when data.bias is set.
#include "sfb/core/config.h"
#include "sfb/core/memory.h"
#include "sfb/io/dataset.h"

namespace sfb::io {

struct LoadedData {
  Dataset train;            // this rank's partition
  Dataset test;             // empty unless requested and configured
  int64_t total_train = 0;  // rows over all ranks
};

// data: the [data] section; seed: job.seed (synthetic data).
LoadedData load_data(const DataConfig& data, uint64_t seed, int rank, int size, bool want_test);

// What load_data would allocate on this rank, from the config and the files' headers (IDX) or
// sizes (libsvm) only: checked before loading (core/memory.h).
MemoryEstimate data_memory(const DataConfig& data, int rank, int size, bool want_test);

}  // namespace sfb::io
