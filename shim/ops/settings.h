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

// Whether this process is a child forked from one that had loaded torch._C (set by
// parallel.cpp's fork handler). OpenMP's threads do not survive fork: there loops run their
// chunks in turn, and operators leave oneDNN aside on more than one thread (its parallel regions
// would wait for the parent's threads forever, as upstream's do; on one, as in a DataLoader
// worker, they need no pool).
bool in_forked_child();
void note_forked_child();

// An operator may call oneDNN: enabled, and not on more than one thread in a forked child.
bool onednn_usable();

}  // namespace tn
