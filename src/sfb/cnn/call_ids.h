#pragma once
// The ids of the CNN mode's collective calls, one definition each. The calls on one channel must
// carry increasing ids (comm/allreduce.h: a message of a later call waits on the channel for it,
// one of a finished call is refused), and the two kinds cannot collide:
//  * the gradient communicator's groups (grad_comm.h; kTagReduce for dense groups, kTagSf for
//    factor groups): group g of iteration `iter` is group_call_id(iter, g). A plan has at most
//    one group per param layer, so while a network has fewer than kGroupIdsPerIteration param
//    layers the ids increase group by group and iteration by iteration, and no two are equal
//    (nothing checks that bound; the networks sfb trains have a handful of param layers).
//  * the re-planner's timing probes (replanner.h): a counter from kFirstProbeCallId, one id per
//    call. They run on channels of their own (kTagProbe, kTagProbeSf), so no group ever sees them;
//    they also start above every group id of the first 2^40 / 4096 = 2^28 iterations, from when
//    they shared the groups' channel.
#include <cstdint>

namespace sfb::cnn {

inline constexpr int64_t kGroupIdsPerIteration = 4096;
inline constexpr int64_t group_call_id(int64_t iter, int64_t group) { return iter * kGroupIdsPerIteration + group; }

inline constexpr int64_t kFirstProbeCallId = int64_t{1} << 40;

}  // namespace sfb::cnn
