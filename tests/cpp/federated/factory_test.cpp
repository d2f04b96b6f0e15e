// The strategy factory: the names it knows, their client-side parameters and its refusals.
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

TEST(Factory, KnowsEveryStrategyAndWhatItCanAggregateFrom) {
  std::map<std::string, bool> from_sum = {{"fedavg", true},     {"fedprox", true},       {"fedavgm", true},
                                          {"fedadagrad", true}, {"fedadam", true},       {"fedyogi", true},
                                          {"fedmedian", false}, {"trimmed_mean", false}, {"krum", false},
                                          {"multi_krum", false}};
  EXPECT_EQ(strategy_names().size(), from_sum.size());
  for (const std::string& name : strategy_names()) {
    json params = name == "fedprox"      ? json{{"proximal_mu", 0.01}}
                  : name == "multi_krum" ? json{{"m", 2}}
                                         : json::object();
    auto strategy = make_strategy(name, params);
    EXPECT_EQ(strategy->name(), name);
    EXPECT_EQ(strategy->aggregates_from_weighted_sum(), from_sum.at(name)) << name;
    // params() holds every parameter with its default, and rebuilds an equal strategy.
    EXPECT_EQ(make_strategy(name, strategy->params())->params(), strategy->params());
  }
  EXPECT_EQ(make_strategy("fedadam")->params(), (json{{"eta", 0.1},
                                                      {"eta_l", 0.1},
                                                      {"tau", 1e-9},
                                                      {"beta_1", 0.9},
                                                      {"beta_2", 0.99},
                                                      {"fit_config", json::object()},
                                                      {"evaluate_config", json::object()}}));
}

TEST(Factory, ClientConfigsCarryTheClientSideParameters) {
  auto prox = make_strategy("fedprox", {{"proximal_mu", 0.01}, {"fit_config", {{"local_epochs", 2}}}});
  EXPECT_EQ(prox->configure_fit(), (json{{"proximal_mu", 0.01}, {"local_epochs", 2}}));
  EXPECT_EQ(make_strategy("fedyogi")->configure_fit(), (json{{"eta_l", 0.0316}}));
  EXPECT_EQ(make_strategy("fedavg", {{"evaluate_config", {{"batch_size", 64}}}})->configure_evaluate(),
            (json{{"batch_size", 64}}));
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedprox", {{"proximal_mu", 0.01}, {"fit_config", {{"proximal_mu", 1}}}});
            }),
            "fedprox: fit_config may not set 'proximal_mu', the strategy sends it");
}

TEST(Factory, RefusesUnknownNamesAndBadParametersByName) {
  EXPECT_EQ(
      message_of<ParameterRefused>([] { make_strategy("fedsgd"); }),
      "unknown strategy 'fedsgd' (known: fedavg, fedprox, fedavgm, fedadagrad, fedadam, fedyogi, fedmedian, "
      "trimmed_mean, krum, multi_krum)");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        make_strategy("fedavgm", {{"momentum", 0.9}});
      }),
      "fedavgm: unknown parameter 'momentum' (known: evaluate_config, fit_config, server_learning_rate, "
      "server_momentum)");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("fedavg", json::array()); }),
            "fedavg: parameters must be a JSON object, got []");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("fedprox"); }),
            "fedprox: parameter 'proximal_mu' is required");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedprox", {{"proximal_mu", -1}});
            }),
            "fedprox: parameter 'proximal_mu' = -1 is outside [0, inf]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedadam", {{"beta_1", 1}});
            }),
            "fedadam: parameter 'beta_1' = 1 is outside [0, 1)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedyogi", {{"tau", 0}});
            }),
            "fedyogi: parameter 'tau' = 0 is outside (0, inf]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedadagrad", {{"eta", "fast"}});
            }),
            "fedadagrad: parameter 'eta' must be a number, got \"fast\"");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        make_strategy("fedadagrad", {{"beta_2", 0.9}});
      }),
      "fedadagrad: unknown parameter 'beta_2' (known: beta_1, eta, eta_l, evaluate_config, fit_config, tau)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("trimmed_mean", {{"beta", 0.5}});
            }),
            "trimmed_mean: parameter 'beta' = 0.5 is outside [0, 0.5)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("krum", {{"f", -1}});
            }),
            "krum: parameter 'f' = -1 is outside [0, 4294967296]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("krum", {{"f", 1.5}});
            }),
            "krum: parameter 'f' must be an integer, got 1.5");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("multi_krum"); }),
            "multi_krum: parameter 'm' is required");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedavg", {{"fit_config", 3}});
            }),
            "fedavg: parameter 'fit_config' must be a JSON object, got 3");
}

}  // namespace
}  // namespace tn::federated
