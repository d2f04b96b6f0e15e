// Every strategy against a reference written here from its paper's formulas (how results are
// compared: federated_test_util.h), and the strategies' refusals, state export and evaluation.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <random>
#include <set>

#include "federated/strategy.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

// McMahan et al. 2017: sum_i n_i x_i / sum_i n_i, the terms taken in device-id order.
Reference weighted_mean(const Federation& federation) {
  int64_t total = 0;
  for (int64_t n : federation.examples) total += n;
  return per_element(federation, [&](size_t k, size_t j) {
    Tracked sum = exact(0);
    for (size_t i = 0; i < federation.values.size(); ++i)
      sum = sum + exact(federation.examples[i]) * exact(federation.values[i][k][j]);
    return sum / exact(total);
  });
}

std::vector<long double> column(const Federation& federation, size_t k, size_t j) {
  std::vector<long double> values;
  for (const Values& client : federation.values) values.push_back(client[k][j]);
  std::sort(values.begin(), values.end());
  return values;
}

Reference coordinate_median(const Federation& federation) {
  return per_element(federation, [&](size_t k, size_t j) {
    std::vector<long double> values = column(federation, k, j);
    size_t n = values.size();
    if (n % 2 == 1) return exact(values[n / 2]);
    return exact(0.5L) * exact(values[n / 2 - 1]) + exact(0.5L) * exact(values[n / 2]);
  });
}

// beta = cut_numerator / cut_denominator, so floor(beta * n) is exact integer arithmetic here.
Reference trimmed_mean(const Federation& federation, size_t cut_numerator, size_t cut_denominator) {
  return per_element(federation, [&](size_t k, size_t j) {
    std::vector<long double> values = column(federation, k, j);
    size_t cut = values.size() * cut_numerator / cut_denominator;
    Tracked sum = exact(0);
    for (size_t i = cut; i < values.size() - cut; ++i) sum = sum + exact(values[i]);
    return sum / exact(values.size() - 2 * cut);
  });
}

// Blanchard et al. 2017. Returns the reference of the mean of the m updates with the lowest
// scores (ties to the lower device id), after checking that no error bound could reorder the
// m-th and (m+1)-th scores. Two scores that sum the very same pair distances (with n - f - 2 = 1,
// a pair of mutual nearest neighbours) are equal in the library too, so the tie is real.
Reference multi_krum(const Federation& federation, size_t f, size_t m) {
  const size_t n = federation.values.size();
  std::vector<std::vector<Tracked>> distance(n, std::vector<Tracked>(n));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      Tracked sum = exact(0);
      for (size_t k = 0; k < federation.spec.tensors().size(); ++k) {
        if (!is_aggregated(federation.spec.tensors()[k].dtype)) continue;
        for (size_t j = 0; j < federation.global_values[k].size(); ++j) {
          Tracked difference = exact(federation.values[a][k][j]) - exact(federation.values[b][k][j]);
          sum = sum + difference * difference;
        }
      }
      distance[a][b] = sum;
    }
  struct Score {
    Tracked value;
    size_t update;
    std::vector<std::pair<size_t, size_t>> pairs;  // the distances summed
  };
  std::vector<Score> scores;
  for (size_t a = 0; a < n; ++a) {
    std::vector<size_t> others;
    for (size_t b = 0; b < n; ++b)
      if (b != a) others.push_back(b);
    std::stable_sort(others.begin(), others.end(),
                     [&](size_t x, size_t y) { return distance[a][x].value < distance[a][y].value; });
    // The library sums its own k smallest distances; each is within the largest error bound
    // of ours, which bounds the difference of the two sums of k smallest as well.
    long double largest_error = 0;
    for (size_t b : others) largest_error = std::max(largest_error, distance[a][b].error);
    Score score{exact(0), a, {}};
    for (size_t i = 0; i < n - f - 2; ++i) {
      score.value = score.value + Tracked{distance[a][others[i]].value, largest_error};
      score.pairs.push_back({std::min(a, others[i]), std::max(a, others[i])});
    }
    std::sort(score.pairs.begin(), score.pairs.end());
    scores.push_back(std::move(score));
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const Score& x, const Score& y) { return x.value.value < y.value.value; });
  if (m < n && scores[m - 1].pairs != scores[m].pairs) {
    const Tracked &last_kept = scores[m - 1].value, &first_dropped = scores[m].value;
    EXPECT_GT(first_dropped.value - last_kept.value, first_dropped.error + last_kept.error)
        << "scores too close to tell which update the library keeps";
  }
  std::vector<size_t> kept;
  for (size_t i = 0; i < m; ++i) kept.push_back(scores[i].update);
  std::sort(kept.begin(), kept.end());
  return per_element(federation, [&](size_t k, size_t j) {
    Tracked sum = exact(0);
    for (size_t i : kept) sum = sum + exact(federation.values[i][k][j]);
    return sum / exact(m);
  });
}

// FedAvgM (Hsu et al. 2019) and FedAdagrad/FedAdam/FedYogi (Reddi et al. 2021, Algorithm 2)
// carried across rounds: state per element, as the papers write it.
struct ServerOptimizerReference {
  std::string kind;
  long double eta, beta_1, beta_2, tau;
  std::vector<std::vector<Tracked>> m, v;  // [tensor][element]; empty before the first round

  Reference step(const Federation& federation) {
    Reference average = weighted_mean(federation);
    bool first = m.empty();
    if (first) m = v = Reference(federation.spec.tensors().size());
    return per_element(federation, [&](size_t k, size_t j) {
      if (first) {
        m[k].push_back(exact(0));
        v[k].push_back(exact(tau) * exact(tau));
      }
      Tracked x = exact(federation.global_values[k][j]);
      Tracked delta = average[k][j] - x;
      if (kind == "fedavgm") {
        m[k][j] = exact(beta_1) * m[k][j] + delta;
        return x + exact(eta) * m[k][j];
      }
      m[k][j] = exact(beta_1) * m[k][j] + (exact(1) - exact(beta_1)) * delta;
      Tracked squared = delta * delta;
      if (kind == "fedadagrad") {
        v[k][j] = v[k][j] + squared;
      } else if (kind == "fedadam") {
        v[k][j] = exact(beta_2) * v[k][j] + (exact(1) - exact(beta_2)) * squared;
      } else {
        Tracked difference = v[k][j] - squared;
        EXPECT_GT(std::fabs(difference.value), difference.error)
            << "the sign of v - delta^2 is not determined";
        long double sign = difference.value > 0 ? 1 : (difference.value < 0 ? -1 : 0);
        v[k][j] = v[k][j] - (exact(1) - exact(beta_2)) * squared * exact(sign);
      }
      return x + exact(eta) * m[k][j] / (sqrt(v[k][j]) + exact(tau));
    });
  }
};

// ---------------------------------------------------------------------------------------------
// Strategies against their references.

TEST(Strategies, FedAvgAndFedProxAreTheExampleWeightedMean) {
  uint64_t seed = 1;
  for (const char* name : {"fedavg", "fedprox"})
    for (ScalarType dtype : kFloatTypes)
      for (int64_t size : kSizes)
        for (size_t clients : {1, 2, 5, 8}) {
          SCOPED_TRACE(std::string(name) + ", " + describe(dtype, size, clients));
          Federation federation = make_federation(dtype, size, clients, seed++);
          auto strategy = make_strategy(
              name, name == std::string("fedprox") ? json{{"proximal_mu", 0.1}} : json::object());
          expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                         weighted_mean(federation));
        }
}

TEST(Strategies, ServerOptimizersFollowTheirUpdateRulesOverSeveralRounds) {
  // The reference's parameters are the same double literals the library parses from JSON.
  struct Setting {
    std::string name;
    json params;
    ServerOptimizerReference reference;
  };
  uint64_t seed = 100;
  for (ScalarType dtype : kFloatTypes)
    for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{16389}})
      for (size_t clients : {1, 3, 6}) {
        std::vector<Setting> settings = {
            {"fedavgm",
             {{"server_learning_rate", 0.7}, {"server_momentum", 0.9}},
             {"fedavgm", 0.7, 0.9, 0, 0, {}, {}}},
            {"fedadagrad",
             {{"eta", 0.1}, {"tau", 1e-3}, {"beta_1", 0.5}},
             {"fedadagrad", 0.1, 0.5, 0, 1e-3, {}, {}}},
            {"fedadam",
             {{"eta", 0.1}, {"tau", 1e-3}, {"beta_1", 0.9}, {"beta_2", 0.99}},
             {"fedadam", 0.1, 0.9, 0.99, 1e-3, {}, {}}},
            {"fedyogi",
             {{"eta", 0.05}, {"tau", 1e-3}, {"beta_1", 0.9}, {"beta_2", 0.99}},
             {"fedyogi", 0.05, 0.9, 0.99, 1e-3, {}, {}}},
        };
        for (Setting& setting : settings) {
          SCOPED_TRACE(setting.name + ", " + describe(dtype, size, clients));
          auto strategy = make_strategy(setting.name, setting.params);
          Federation federation = make_federation(dtype, size, clients, seed++);
          for (int round = 0; round < 3; ++round) {
            SCOPED_TRACE("round " + std::to_string(round));
            Reference want = setting.reference.step(federation);
            Model result = strategy->aggregate(federation.global, federation.updates);
            expect_matches(result, federation, want);
            // The float64 state, too, is what the equations give.
            StrategyState state = strategy->export_state();
            EXPECT_EQ(state.meta["rounds"], round + 1);
            for (const NamedTensor& tensor : state.tensors.tensors) {
              ASSERT_EQ(tensor.dtype, ScalarType::Double);
              bool is_v = tensor.name.starts_with("v/");
              std::string tensor_name = tensor.name.substr(tensor.name.find('/') + 1);
              size_t k = 0;
              while (federation.spec.tensors()[k].name != tensor_name) ++k;
              const auto& reference_state = is_v ? setting.reference.v[k] : setting.reference.m[k];
              for (size_t j = 0; j < reference_state.size(); ++j)
                ASSERT_TRUE(rounds_from(ScalarType::Double, tensor.data.get() + 8 * j, reference_state[j]))
                    << tensor.name << "[" << j << "]";
            }
            federation = next_round(federation, result, clients, seed++);
          }
        }
      }
}

TEST(Strategies, FedMedianIsTheCoordinateWiseMedian) {
  uint64_t seed = 200;
  for (ScalarType dtype : kFloatTypes)
    for (int64_t size : kSizes)
      for (size_t clients : {1, 2, 3, 4, 7, 64}) {  // 64 clients make the library's chunks 16384 long
        SCOPED_TRACE(describe(dtype, size, clients));
        Federation federation = make_federation(dtype, size, clients, seed++);
        expect_matches(make_strategy("fedmedian")->aggregate(federation.global, federation.updates),
                       federation, coordinate_median(federation));
      }
}

TEST(Strategies, MedianOfAnOddCountIsExactlyOneOfTheValues) {
  // The reference error is zero here, so rounds_from demands equality; this checks that directly.
  Federation federation = make_federation(ScalarType::Float, 1000, 5, 250);
  Model result = make_strategy("fedmedian")->aggregate(federation.global, federation.updates);
  for (size_t j = 0; j < 1000; ++j)
    ASSERT_EQ(decode(ScalarType::Float, result.tensors[0].data.get() + 4 * j), column(federation, 0, j)[2]);
}

TEST(Strategies, TrimmedMeanCutsBetaFromEachEnd) {
  uint64_t seed = 300;
  struct Beta {
    double value;
    size_t numerator, denominator;
  };
  for (Beta beta : {Beta{0.0, 0, 1}, Beta{0.2, 1, 5}, Beta{0.25, 1, 4}, Beta{0.45, 9, 20}})
    for (ScalarType dtype : kFloatTypes)
      // The chunking this shares with the median is crossed in the median's test.
      for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}})
        for (size_t clients : {1, 2, 4, 5, 9, 20}) {
          SCOPED_TRACE("beta " + std::to_string(beta.value) + ", " + describe(dtype, size, clients));
          Federation federation = make_federation(dtype, size, clients, seed++);
          auto strategy = make_strategy("trimmed_mean", {{"beta", beta.value}});
          expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                         trimmed_mean(federation, beta.numerator, beta.denominator));
        }
}

TEST(Strategies, KrumAndMultiKrumKeepTheLowestScores) {
  uint64_t seed = 400;
  struct Setting {
    size_t f, m, clients;
  };
  for (Setting s : {Setting{0, 1, 3}, Setting{1, 1, 5}, Setting{1, 3, 6}, Setting{2, 1, 7}, Setting{2, 5, 9}})
    for (ScalarType dtype : kFloatTypes)
      for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{2000}}) {
        SCOPED_TRACE("f " + std::to_string(s.f) + ", m " + std::to_string(s.m) + ", " +
                     describe(dtype, size, s.clients));
        Federation federation = make_federation(dtype, size, s.clients, seed++);
        auto strategy = s.m == 1 ? make_strategy("krum", {{"f", s.f}})
                                 : make_strategy("multi_krum", {{"f", s.f}, {"m", s.m}});
        expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                       multi_krum(federation, s.f, s.m));
      }
}

TEST(Strategies, KrumIgnoresByzantineOutliers) {
  // Five honest updates near 1.0 and two Byzantine ones at 1000: Krum returns an honest update
  // exactly, Multi-Krum (m = n - f) the mean of the honest ones.
  ModelSpec spec({{"w", ScalarType::Float, {3}}});
  Model global{{tensor_from(spec.tensors()[0], {0, 0, 0})}};
  std::vector<Update> updates;
  std::vector<std::vector<long double>> honest;
  for (int i = 0; i < 7; ++i) {
    std::vector<long double> values = i < 5 ? std::vector<long double>{1 + i / 64.0L, 1 - i / 128.0L, 1}
                                            : std::vector<long double>{1000, -1000, 1000};
    if (i < 5) honest.push_back(values);
    updates.push_back(
        {"d" + std::to_string(i), 1, 0, i < 5 ? 10 : 1000000, {{tensor_from(spec.tensors()[0], values)}}});
  }
  Model krum = make_strategy("krum", {{"f", 2}})->aggregate(global, updates);
  std::vector<long double> chosen;
  for (int j = 0; j < 3; ++j) chosen.push_back(decode(ScalarType::Float, krum.tensors[0].data.get() + 4 * j));
  EXPECT_NE(std::find(honest.begin(), honest.end(), chosen), honest.end());
  Model multi = make_strategy("multi_krum", {{"f", 2}, {"m", 5}})->aggregate(global, updates);
  EXPECT_EQ(decode(ScalarType::Float, multi.tensors[0].data.get()), (5 + (0 + 1 + 2 + 3 + 4) / 64.0L) / 5);
}

TEST(Strategies, TheOrderOfArrivalDoesNotChangeABit) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},          {"fedprox", {{"proximal_mu", 1}}}, {"fedavgm", json::object()},
      {"fedadagrad", json::object()},      {"fedadam", json::object()},       {"fedyogi", json::object()},
      {"fedmedian", json::object()},       {"trimmed_mean", {{"beta", 0.2}}}, {"krum", {{"f", 1}}},
      {"multi_krum", {{"f", 1}, {"m", 3}}}};
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 3001, 9, 500 + uint64_t(dtype));
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      Model first = make_strategy(name, params)->aggregate(federation.global, federation.updates);
      std::vector<Update> permuted = federation.updates;
      std::mt19937_64 rng(7);
      for (int trial = 0; trial < 3; ++trial) {
        std::shuffle(permuted.begin(), permuted.end(), rng);
        Model again = make_strategy(name, params)->aggregate(federation.global, permuted);
        EXPECT_TRUE(same_bytes(first, again));
      }
    }
  }
}

TEST(Strategies, WeightedSumEntryPointGivesTheSameBitsAsTheUpdates) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},     {"fedprox", {{"proximal_mu", 0.5}}}, {"fedavgm", json::object()},
      {"fedadagrad", json::object()}, {"fedadam", json::object()},         {"fedyogi", json::object()}};
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 20000, 6, 600 + uint64_t(dtype));
    WeightedSum sums = float64_sums(federation);
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      auto from_updates = make_strategy(name, params);
      auto from_sum = make_strategy(name, params);
      ASSERT_TRUE(from_sum->aggregates_from_weighted_sum());
      for (int round = 0; round < 2; ++round) {  // the second round runs on the carried state
        Model a = from_updates->aggregate(federation.global, federation.updates);
        Model b = from_sum->aggregate_from_weighted_sum(federation.global, sums);
        EXPECT_TRUE(same_bytes(a, b));
      }
    }
  }
}

TEST(Strategies, RobustStrategiesRefuseAWeightedSumByName) {
  Federation federation = make_federation(ScalarType::Float, 4, 5, 650);
  WeightedSum sums = float64_sums(federation);
  for (const auto& [name, params] :
       std::vector<std::pair<std::string, json>>{{"fedmedian", json::object()},
                                                 {"trimmed_mean", json::object()},
                                                 {"krum", json::object()},
                                                 {"multi_krum", {{"m", 2}}}}) {
    auto strategy = make_strategy(name, params);
    EXPECT_FALSE(strategy->aggregates_from_weighted_sum());
    EXPECT_EQ(
        message_of<Unsupported>([&] { strategy->aggregate_from_weighted_sum(federation.global, sums); }),
        name + ": cannot aggregate from a weighted sum, it needs the individual updates");
  }
}

TEST(Strategies, ExportAndRestoreContinueBitForBit) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},     {"fedavgm", {{"server_momentum", 0.8}}},
      {"fedadagrad", json::object()}, {"fedadam", json::object()},
      {"fedyogi", {{"tau", 0.01}}},   {"fedmedian", json::object()},
      {"krum", json::object()}};
  for (ScalarType dtype : kFloatTypes)
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      std::vector<Federation> rounds = {make_federation(dtype, 17000, 5, 700)};
      auto uninterrupted = make_strategy(name, params);
      std::vector<Model> results;
      for (int round = 0; round < 3; ++round) {
        results.push_back(uninterrupted->aggregate(rounds.back().global, rounds.back().updates));
        rounds.push_back(next_round(rounds.back(), results.back(), 5, 710 + uint64_t(round)));
      }

      auto killed = make_strategy(name, params);
      for (int round = 0; round < 2; ++round)
        killed->aggregate(rounds[size_t(round)].global, rounds[size_t(round)].updates);
      // What a coordinator would write to disk and read back after kill -9: JSON text and bytes
      // in fresh buffers.
      StrategyState saved = killed->export_state();
      killed.reset();
      StrategyState loaded{json::parse(saved.meta.dump()), {}};
      for (const NamedTensor& tensor : saved.tensors.tensors)
        loaded.tensors.tensors.push_back(
            copy_tensor(tensor.name, tensor.dtype, tensor.shape, {tensor.data.get(), tensor.nbytes}));
      auto resumed = restore_strategy(loaded);
      EXPECT_EQ(resumed->rounds(), 2u);
      Model third = resumed->aggregate(rounds[2].global, rounds[2].updates);
      EXPECT_TRUE(same_bytes(third, results[2]));
      StrategyState after_uninterrupted = uninterrupted->export_state(),
                    after_resumed = resumed->export_state();
      EXPECT_EQ(after_uninterrupted.meta, after_resumed.meta);
      EXPECT_TRUE(same_bytes(after_uninterrupted.tensors, after_resumed.tensors));
    }
}

TEST(Strategies, RestoreRefusesAStateThatDoesNotFit) {
  Federation federation = make_federation(ScalarType::Float, 5, 3, 800);
  auto adam = make_strategy("fedadam");
  adam->aggregate(federation.global, federation.updates);
  StrategyState state = adam->export_state();

  EXPECT_EQ(message_of<ParameterRefused>([&] { make_strategy("fedyogi")->restore_state(state); }),
            "fedyogi: the saved state belongs to strategy \"fedadam\"");
  EXPECT_NE(message_of<ParameterRefused>([&] {
              make_strategy("fedadam", {{"eta", 0.2}})->restore_state(state);
            }).find("fedadam: the saved state has parameters"),
            std::string::npos);
  StrategyState foreign = state;
  foreign.tensors.tensors[0].name = "momentum/layer.weight";
  EXPECT_EQ(
      message_of<ParameterRefused>([&] { make_strategy("fedadam")->restore_state(foreign); }),
      "fedadam: the saved state has tensor 'momentum/layer.weight', which is not one of its state tensors");
  StrategyState unpaired = state;
  std::erase_if(unpaired.tensors.tensors, [](const NamedTensor& t) { return t.name == "v/layer.bias"; });
  EXPECT_EQ(message_of<ParameterRefused>([&] { make_strategy("fedadam")->restore_state(unpaired); }),
            "fedadam: the saved state has 'm/layer.bias' without its 'v/layer.bias'");
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              make_strategy("fedavg")->restore_state(
                  {{{"strategy", "fedavg"}, {"params", make_strategy("fedavg")->params()}, {"rounds", 1}},
                   state.tensors});
            }),
            "fedavg: the saved state has tensor '" + state.tensors.tensors[0].name +
                "', which is not kept by this strategy");
  // A state of another model is refused at the next aggregate, naming the tensor.
  auto resumed = restore_strategy(state);
  Federation other = make_federation(ScalarType::Float, 6, 3, 801);
  EXPECT_EQ(message_of<ParameterRefused>([&] { resumed->aggregate(other.global, other.updates); }),
            "fedadam: state 'm/layer.weight' has shape [5], the model's tensor has [6]");
}

TEST(Strategies, AnAggregateThatOverflowsIsRefusedAndChangesNothing) {
  // float16 tops out at 65504: momentum pushes the mean 60000 past it.
  ModelSpec spec({{"w", ScalarType::Half, {2}}});
  Model global{{tensor_from(spec.tensors()[0], {0, 1})}};
  std::vector<Update> updates = {{"a", 1, 0, 1, {{tensor_from(spec.tensors()[0], {60000, 1})}}}};
  auto strategy = make_strategy("fedavgm", {{"server_learning_rate", 2.0}});
  EXPECT_EQ(message_of<AggregationFailed>([&] { strategy->aggregate(global, updates); }),
            "fedavgm: tensor 'w' element 0 (index [0]) is not finite in float16 after aggregation; the model "
            "is left "
            "unchanged");
  EXPECT_EQ(strategy->rounds(), 0u);
  EXPECT_TRUE(strategy->export_state().tensors.tensors.empty());
}

TEST(Strategies, AggregateRefusesUpdatesThatDoNotFitTheModel) {
  Federation federation = make_federation(ScalarType::Float, 5, 3, 900);
  auto fedavg = make_strategy("fedavg");
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate(federation.global, {}); }),
            "fedavg: needs at least 1 update, got 0");
  std::vector<Update> twice = federation.updates;
  twice.push_back(twice[0]);
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, twice); }), Reason::Duplicate);
  std::vector<Update> reshaped = federation.updates;
  reshaped[1].model.tensors[0].shape = {1, 5};
  EXPECT_EQ(message_of<UpdateRefused>([&] { fedavg->aggregate(federation.global, reshaped); }),
            "fedavg: update from '" + reshaped[1].device_id +
                "': tensor 'layer.weight' does not match the global model's dtype, shape or size");
  std::vector<Update> short_buffer = federation.updates;
  short_buffer[0].model.tensors[0].nbytes -= 4;
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, short_buffer); }), Reason::Malformed);
  std::vector<Update> no_examples = federation.updates;
  no_examples[2].num_examples = 0;
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, no_examples); }), Reason::BadExamples);
}

TEST(Strategies, KrumNeedsEnoughUpdates) {
  Federation federation = make_federation(ScalarType::Float, 4, 5, 950);
  EXPECT_EQ(message_of<Refused>([&] {
              make_strategy("krum", {{"f", 2}})->aggregate(federation.global, federation.updates);
            }),
            "krum: needs at least 2f+3 = 7 updates, got 5");
  EXPECT_EQ(make_strategy("krum", {{"f", 2}})->min_updates(), 7u);
  EXPECT_EQ(
      message_of<Refused>([&] {
        make_strategy("multi_krum", {{"f", 1}, {"m", 5}})->aggregate(federation.global, federation.updates);
      }),
      "multi_krum: keeping m = 5 of 5 updates with f = 1 needs m <= n - f = 4");
  EXPECT_EQ(make_strategy("multi_krum", {{"f", 1}, {"m", 5}})->min_updates(), 6u);
}

TEST(Strategies, WeightedSumIsCheckedAgainstTheModel) {
  Federation federation = make_federation(ScalarType::Float, 4, 3, 960);
  WeightedSum sums = float64_sums(federation);
  auto fedavg = make_strategy("fedavg");
  WeightedSum no_weight = sums;
  no_weight.total_weight = 0;
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, no_weight); }),
            "fedavg: the weighted sum's total weight 0.000000 must be positive and finite");
  WeightedSum missing = sums;
  missing.sum.tensors.pop_back();
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, missing); }),
            "fedavg: the weighted sum lacks tensor 'head.weight'");
  WeightedSum with_counter = sums;
  with_counter.sum.tensors.push_back(federation.global.tensors[3]);
  EXPECT_EQ(
      message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, with_counter); }),
      "fedavg: the weighted sum has 4 tensors, the model has 3 floating ones");
  WeightedSum not_finite = sums;
  std::vector<double> nan_values = {1, NAN, 3, 4};
  not_finite.sum.tensors[0] = copy_tensor("layer.weight", ScalarType::Double, {4},
                                          std::as_bytes(std::span<const double>(nan_values)));
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, not_finite); }),
            "fedavg: the weighted sum's tensor 'layer.weight' element 1 is not finite");
}

TEST(Strategies, EvaluationIsTheExampleWeightedMean) {
  auto strategy = make_strategy("fedavg");
  std::vector<EvaluationResult> results = {{"c", 30, 0.25, {{"accuracy", 0.9}}},
                                           {"a", 10, 1.5, {{"accuracy", 0.5}, {"f1", 0.4}}},
                                           {"b", 7, 0.125, {}}};
  EvaluationSummary summary = strategy->aggregate_evaluate(results);
  EXPECT_EQ(summary.num_examples, 47);
  EXPECT_EQ(summary.contributors, (std::vector<DeviceId>{"a", "b", "c"}));
  // In device order: a, b, c.
  Tracked loss = (exact(10) * exact(1.5) + exact(7) * exact(0.125) + exact(30) * exact(0.25)) / exact(47);
  Tracked accuracy = (exact(10) * exact(double(0.5)) + exact(30) * exact(double(0.9))) / exact(40);
  EXPECT_TRUE(rounds_from(ScalarType::Double, reinterpret_cast<const std::byte*>(&summary.loss), loss));
  EXPECT_TRUE(rounds_from(ScalarType::Double,
                          reinterpret_cast<const std::byte*>(&summary.metrics.at("accuracy")), accuracy));
  EXPECT_EQ(summary.metrics.at("f1"), 0.4);

  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate({}); }),
            "fedavg: no evaluation results to aggregate");
  std::vector<EvaluationResult> twice = {{"a", 1, 0, {}}, {"a", 2, 0, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(twice); }),
            "fedavg: evaluation from 'a' is listed twice");
  std::vector<EvaluationResult> empty = {{"a", 0, 0, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(empty); }),
            "fedavg: evaluation from 'a': 0 examples, must be at least 1");
  std::vector<EvaluationResult> nan_loss = {{"a", 1, NAN, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(nan_loss); }),
            "fedavg: evaluation from 'a': the loss is not finite");
  std::vector<EvaluationResult> inf_metric = {{"a", 1, 0, {{"auc", INFINITY}}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(inf_metric); }),
            "fedavg: evaluation from 'a': metric 'auc' is not finite");
}

}  // namespace
}  // namespace tn::federated
