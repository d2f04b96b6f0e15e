// The coordinate-wise strategies' walk over the updates, a chunk of coordinates at a time.
#include "coordinate_wise.h"

#include <algorithm>

#include "numeric.h"

namespace tn::federated::detail {

Model CoordinateWiseStrategy::aggregate(const Model& global, std::span<const Update> updates) {
  AlignedUpdates aligned = align_updates(name(), global, updates, 1);
  return aggregate_loaded(global, aligned.updates.size(), load_aligned(aligned), 0);
}

Model CoordinateWiseStrategy::aggregate_from_updates(const Model& global, const UpdatesReader& updates) {
  UpdateLoader load = load_read(name(), global, updates, 1);
  return aggregate_loaded(global, updates.count, load, updates.chunk_elements);
}

// Coordinates `chunk` at a time (0: as many as fit about 8 MB of scratch for all n updates,
// whatever n), each from every update's values of it.
Model CoordinateWiseStrategy::aggregate_loaded(const Model& global, size_t n, const UpdateLoader& load,
                                               int64_t chunk) {
  if (chunk == 0) chunk = std::max<int64_t>(1, kScratchDoubles / int64_t(n));
  std::vector<double> rows(n * static_cast<size_t>(chunk)), column(n);
  Model result =
      map_aggregated_tensors(name(), global, chunk, [&](size_t k, int64_t begin, std::span<double> y) {
        const size_t count = y.size();
        for (size_t i = 0; i < n; ++i) load(i, k, begin, {rows.data() + i * count, count});
        for (size_t j = 0; j < count; ++j) {
          for (size_t i = 0; i < n; ++i) column[i] = rows[i * count + j];
          y[j] = combine(column);
        }
      });
  count_round();
  return result;
}

}  // namespace tn::federated::detail
