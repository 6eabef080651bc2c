#pragma once
// Loads the training partition of one rank and (optionally) the test set, as the config says:
// IDX, libsvm or synthetic, with the bias feature appended when data.bias is set.
#include <vector>

#include "sfb/core/config.h"
#include "sfb/core/memory.h"
#include "sfb/io/dataset.h"

namespace sfb::io {

struct LoadedData {
  Dataset train;            // this rank's partition (data.partition: io/partition.h)
  Dataset test;             // empty unless requested and configured
  Dataset eval_sample;      // the objective's uniform sample of all training rows; empty unless requested
  int64_t total_train = 0;  // rows over all ranks
  // libsvm: the file's label of each class 0..J-1 (any integers, ascending: liblinear's map when
  // data.classes is unset, else data.label_offset + j); empty for the other formats (labels are
  // the classes). Every rank reads the same file, so every rank holds the same map.
  std::vector<int64_t> labels;
};

struct LoadRequest {
  int rank = 0;
  int size = 1;
  bool want_test = false;
  int64_t eval_sample = 0;  // rows of the objective's sample to load (0: none)
};

// data: the [data] section; seed: job.seed (the partition's permutation, synthetic data).
LoadedData load_data(const DataConfig& data, uint64_t seed, const LoadRequest& req);
LoadedData load_data(const DataConfig& data, uint64_t seed, int rank, int size, bool want_test);

// What load_data would allocate on this rank, from the config and the files' headers (IDX) or
// sizes (libsvm) only: checked before loading (core/memory.h).
MemoryEstimate data_memory(const DataConfig& data, const LoadRequest& req);
MemoryEstimate data_memory(const DataConfig& data, int rank, int size, bool want_test);

}  // namespace sfb::io
