// Krum and Multi-Krum (Blanchard et al. 2017, "Machine Learning with Adversaries: Byzantine
// Tolerant Gradient Descent"): keep the updates closest to their nearest neighbours.
#include <algorithm>
#include <numeric>

#include "federated/errors.h"
#include "numeric.h"
#include "strategy_support.h"

namespace tn::federated::detail {
namespace {

class KrumStrategy final : public Strategy {
 public:
  KrumStrategy(std::string name, nlohmann::json params, ClientConfigs configs, size_t byzantine, size_t keep)
      : Strategy(std::move(name), std::move(params), std::move(configs.fit), std::move(configs.evaluate)),
        f_(byzantine),
        m_(keep) {}

  bool aggregates_from_weighted_sum() const override { return false; }
  // n >= 2f + 3 (the paper's n > 2f + 2) for the scores to exist, n >= m + f so that the m kept
  // can all be honest.
  size_t min_updates() const override { return std::max(2 * f_ + 3, m_ + f_); }

  Model aggregate(const Model& global, std::span<const Update> updates) override {
    check_count(updates.size());
    AlignedUpdates aligned = align_updates(name(), global, updates, min_updates());
    return aggregate_loaded(global, aligned.updates.size(), load_aligned(aligned), 0);
  }

  Model aggregate_from_updates(const Model& global, const UpdatesReader& updates) override {
    check_count(updates.count);
    UpdateLoader load = load_read(name(), global, updates, min_updates());
    return aggregate_loaded(global, updates.count, load, updates.chunk_elements);
  }

 private:
  void check_count(size_t n) const {
    if (n < 2 * f_ + 3)
      throw Refused(name() + ": needs at least 2f+3 = " + std::to_string(2 * f_ + 3) + " updates, got " +
                    std::to_string(n));
    if (m_ + f_ > n)
      throw Refused(name() + ": keeping m = " + std::to_string(m_) + " of " + std::to_string(n) +
                    " updates with f = " + std::to_string(f_) +
                    " needs m <= n - f = " + std::to_string(n - f_));
  }

  // Two passes over the updates, `chunk` coordinates at a time (0: the defaults below): the
  // pairwise distances, then the mean of the kept updates.
  Model aggregate_loaded(const Model& global, size_t n, const UpdateLoader& load, int64_t chunk) {
    std::vector<size_t> kept = lowest_scores(global, n, load, chunk);
    const int64_t mean_chunk = chunk > 0 ? chunk : kChunkElements;
    std::vector<double> x(static_cast<size_t>(mean_chunk));
    Model result = map_aggregated_tensors(name(), global, mean_chunk,
                                          [&](size_t k, int64_t begin, std::span<double> sum) {
                                            std::fill(sum.begin(), sum.end(), 0.0);
                                            for (size_t i : kept) {
                                              load(i, k, begin, {x.data(), sum.size()});
                                              for (size_t j = 0; j < sum.size(); ++j) sum[j] += x[j];
                                            }
                                            for (double& value : sum) value /= double(kept.size());
                                          });
    count_round();
    return result;
  }

  // Indices (into the device-sorted updates, ascending) of the m updates with the lowest scores;
  // a tie goes to the lower device id.
  std::vector<size_t> lowest_scores(const Model& global, size_t n, const UpdateLoader& load,
                                    int64_t chunk) const {
    // distance[i * n + j]: |x_i - x_j|^2 over every aggregated coordinate, summed in model
    // order, so the chunking does not change a bit.
    std::vector<double> distance(n * n, 0.0);
    if (chunk == 0) chunk = std::max<int64_t>(1, kScratchDoubles / int64_t(n));
    std::vector<double> rows(n * size_t(chunk));
    for (size_t k = 0; k < global.tensors.size(); ++k) {
      const NamedTensor& tensor = global.tensors[k];
      if (!is_aggregated(tensor.dtype)) continue;
      const int64_t numel = tensor.numel();
      for (int64_t begin = 0; begin < numel; begin += chunk) {
        const size_t count = size_t(std::min(chunk, numel - begin));
        for (size_t i = 0; i < n; ++i) load(i, k, begin, {rows.data() + i * count, count});
        for (size_t a = 0; a < n; ++a)
          for (size_t b = a + 1; b < n; ++b) {
            double total = distance[a * n + b];
            const double* xa = rows.data() + a * count;
            const double* xb = rows.data() + b * count;
            for (size_t j = 0; j < count; ++j) {
              double difference = xa[j] - xb[j];
              total += difference * difference;
            }
            distance[a * n + b] = total;
          }
      }
    }
    std::vector<double> score(n), neighbours;
    for (size_t a = 0; a < n; ++a) {
      neighbours.clear();
      for (size_t b = 0; b < n; ++b)
        if (b != a) neighbours.push_back(distance[std::min(a, b) * n + std::max(a, b)]);
      std::sort(neighbours.begin(), neighbours.end());
      score[a] = std::accumulate(neighbours.begin(), neighbours.begin() + ptrdiff_t(n - f_ - 2), 0.0);
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
    order.resize(m_);
    std::sort(order.begin(), order.end());
    return order;
  }

  size_t f_;
  size_t m_;
};

// Far above any real round, small enough that 2f + 3 and m + f cannot overflow.
constexpr int64_t kMaxUpdates = int64_t{1} << 32;

// Krum keeps one update; Multi-Krum reads how many (m) from its parameters.
std::unique_ptr<Strategy> make_keeping(const std::string& name, const nlohmann::json& params, bool multi) {
  ParamReader reader(name, params);
  size_t byzantine = size_t(reader.integer("f", 0, 0, kMaxUpdates));
  size_t keep = multi ? size_t(reader.integer("m", std::nullopt, 1, kMaxUpdates)) : 1;
  ClientConfigs configs = read_client_configs(name, reader, nlohmann::json::object());
  nlohmann::json resolved = reader.finish();
  return std::make_unique<KrumStrategy>(name, std::move(resolved), std::move(configs), byzantine, keep);
}

}  // namespace

std::unique_ptr<Strategy> make_krum(const nlohmann::json& params) {
  return make_keeping("krum", params, false);
}

std::unique_ptr<Strategy> make_multi_krum(const nlohmann::json& params) {
  return make_keeping("multi_krum", params, true);
}

}  // namespace tn::federated::detail
