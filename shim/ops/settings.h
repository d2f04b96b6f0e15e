// Process-wide settings the kernels read, which torch._C's bindings set: how many threads an
// operator may use (torch.set_num_threads) and whether oneDNN may compute convolutions
// (torch.backends.mkldnn.enabled). Both start as upstream's do.
#pragma once

namespace tn {

// torch.get_num_threads(): set_intra_op_threads's count, else upstream's default
// (OMP_NUM_THREADS, else MKL_NUM_THREADS, else the processors halved on x86-64, at least one).
int intra_op_threads();
void set_intra_op_threads(int count);

// The processors halved on x86-64 (taken as hyperthread pairs), at least one: upstream's
// thread pools' default size.
int default_pool_size();

// torch.backends.mkldnn.enabled (on until turned off): off, no operator takes a oneDNN path.
bool onednn_enabled();
void set_onednn_enabled(bool enabled);

}  // namespace tn
