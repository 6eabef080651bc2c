#pragma once
// Ring all-reduce (sum), what Horovod and NCCL do for large buffers: a reduce-scatter of P - 1
// steps, each rank sending one chunk to its right neighbour and adding the chunk from its left,
// then an all-gather of P - 1 steps passing the reduced chunks around. 2 (P - 1) / P of the buffer
// leaves each rank; every rank ends with bitwise the same sums (each chunk is summed once, by one
// rank, and copied to the others). Messages on kTagReduce, allreduce_chunks.h.
//
// Threads: called by one thread per rank; `recv_left` yields the next kTagReduce message from the
// left neighbour (the caller may feed it from a queue when another thread owns the receiving side).
#include <functional>
#include <span>

#include "sfb/comm/transport.h"

namespace sfb::comm {

// Sums `data` over ranks 0..workers-1 of `t` in place (ranks beyond `workers` do not take part);
// `id` labels this call's messages (the clock), checked on arrival.
void ring_allreduce(Transport& t, int workers, std::span<float> data, int64_t id,
                    const std::function<Message()>& recv_left);

}  // namespace sfb::comm
