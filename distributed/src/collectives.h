// The collective algorithms, one file each. Each runs on the group's worker thread with the
// operation's context and returns when this rank's part is complete, or throws.
#pragma once

#include <vector>

#include "distributed/process_group.h"
#include "op_context.h"

namespace tn::dist {

void run_allreduce(OpContext& context, Buffer& buffer, ReduceOp op);
// The large-message half of allreduce (root -1) and reduce (root >= 0), shared by both.
void reduce_blocks(OpContext& context, Buffer& buffer, ReduceOp op, int root);
void run_broadcast(OpContext& context, Buffer& buffer, int root);
// A star hub's broadcast that carries on past spokes lost before or during it: those, ascending.
std::vector<int> run_broadcast_to_reachable(OpContext& context, Buffer& buffer);
void run_reduce(OpContext& context, Buffer& buffer, int root, ReduceOp op);
void run_allgather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs);
void run_gather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs, int root);
void run_scatter(OpContext& context, std::vector<Buffer>& inputs, Buffer& output, int root);
void run_reduce_scatter(OpContext& context, std::vector<Buffer>& inputs, Buffer& output, ReduceOp op);
void run_alltoall(OpContext& context, std::vector<Buffer>& inputs, std::vector<Buffer>& outputs);
void run_barrier(OpContext& context);
// With `defer`, root (whose buffer has no data) leaves the contributions in result.deferred.
void run_deadline_reduce(OpContext& context, Buffer& buffer, int root, ReduceOp op,
                         Clock::time_point deadline, DeadlineReduceResult& result,
                         const ContributionCheck& check, bool defer);
// A reduction streamed to root at root's pace, for deadline_reduce and a star group's large
// reduce (deadline_reduce.cpp). Every other rank sends its buffer; root combines into its own
// the buffers that arrived whole by `deadline` (or, with `defer`, keeps them for
// result.deferred), or, with `every_rank`, fails naming the ranks that were lost or late.
// False when root closed the round before taking the whole buffer.
bool send_streamed(OpContext& context, const Buffer& buffer, int root);
DeadlineReduceResult receive_streamed(OpContext& context, Buffer& buffer, ReduceOp op,
                                      Clock::time_point deadline, bool every_rank,
                                      const ContributionCheck& check = {}, bool defer = false);

}  // namespace tn::dist
