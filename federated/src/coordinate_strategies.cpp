// FedMedian and the trimmed mean: each coordinate of the result depends only on that
// coordinate's values across updates, so they cannot start from a sum.
#include <algorithm>
#include <cmath>

#include "federated/errors.h"
#include "numeric.h"
#include "strategies.h"

namespace tn::federated::detail {
namespace {

class CoordinateStrategy final : public Strategy {
 public:
  // trim_fraction < 0 means the median.
  CoordinateStrategy(std::string name, nlohmann::json params, ClientConfigs configs, double trim_fraction)
      : Strategy(std::move(name), std::move(params), std::move(configs.fit), std::move(configs.evaluate)),
        trim_fraction_(trim_fraction) {}

  bool aggregates_from_weighted_sum() const override { return false; }

  Model aggregate(const Model& global, std::span<const Update> updates) override {
    AlignedUpdates aligned = align_updates(name(), global, updates, 1);
    return aggregate_loaded(global, aligned.updates.size(), load_aligned(aligned), 0);
  }

  Model aggregate_from_updates(const Model& global, const UpdatesReader& updates) override {
    UpdateLoader load = load_read(name(), global, updates, 1);
    return aggregate_loaded(global, updates.count, load, updates.chunk_elements);
  }

 private:
  // Coordinates `chunk` at a time (0: as many as fit about 8 MB of scratch for all n updates,
  // whatever n), each from every update's values of it.
  Model aggregate_loaded(const Model& global, size_t n, const UpdateLoader& load, int64_t chunk) {
    const size_t cut = trim_fraction_ < 0 ? 0 : floor_of_product(trim_fraction_, n);
    if (chunk == 0) chunk = std::max<int64_t>(1, kScratchDoubles / int64_t(n));
    std::vector<double> rows(n * static_cast<size_t>(chunk)), column(n);
    Model result =
        map_aggregated_tensors(name(), global, chunk, [&](size_t k, int64_t begin, std::span<double> y) {
          const size_t count = y.size();
          for (size_t i = 0; i < n; ++i) load(i, k, begin, {rows.data() + i * count, count});
          for (size_t j = 0; j < count; ++j) {
            for (size_t i = 0; i < n; ++i) column[i] = rows[i * count + j];
            y[j] = trim_fraction_ < 0 ? median(column) : trimmed_mean(column, cut);
          }
        });
    count_round();
    return result;
  }

  // For an even count the mean of the two middle values, as a/2 + b/2: halving is exact for
  // values read from float16/bfloat16/float32 (and for normal float64), and cannot overflow.
  static double median(std::vector<double>& values) {
    const size_t middle = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + middle, values.end());
    double upper = values[middle];
    if (values.size() % 2 == 1) return upper;
    double lower = *std::max_element(values.begin(), values.begin() + middle);
    return 0.5 * lower + 0.5 * upper;
  }

  // The mean of the values left after cutting `cut` from each end, summed in ascending order.
  static double trimmed_mean(std::vector<double>& values, size_t cut) {
    std::sort(values.begin(), values.end());
    double sum = 0;
    for (size_t i = cut; i < values.size() - cut; ++i) sum += values[i];
    return sum / double(values.size() - 2 * cut);
  }

  double trim_fraction_;
};

}  // namespace

std::unique_ptr<Strategy> make_coordinate_strategy(const std::string& name, const nlohmann::json& params) {
  ParamReader reader(name, params);
  double trim_fraction = name == "trimmed_mean" ? reader.real("beta", 0.2, {0, 0.5, false, true}) : -1;
  ClientConfigs configs = read_client_configs(name, reader, nlohmann::json::object());
  nlohmann::json resolved = reader.finish();
  return std::make_unique<CoordinateStrategy>(name, std::move(resolved), std::move(configs), trim_fraction);
}

}  // namespace tn::federated::detail
