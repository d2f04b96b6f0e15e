// Device selection: counts, determinism under a seed, uniformity and refusals.
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

#include "federated/selection.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

TEST(Selection, CountsAreTheClampedCeilingTimesTheOverSelection) {
  struct Case {
    size_t available;
    SelectionConfig config;
    size_t target, selected;
  };
  for (const Case& c : {Case{30, {0.1, 1, 100, 1.0}, 3, 3},     // 0.1 * 30 is 3.0000000000000004 in double
                        Case{30, {0.1, 1, 100, 1.3}, 3, 4},     // ceil(3.9)
                        Case{10, {0.1, 1, 100, 1.3}, 1, 2},     // 1.3 * 1 -> 2
                        Case{7, {0.5, 1, 100, 1.0}, 4, 4},      // ceil(3.5)
                        Case{100, {0.01, 5, 100, 1.0}, 5, 5},   // clamped up to min
                        Case{100, {0.9, 1, 20, 1.3}, 20, 26},   // clamped down to max, then over-selected
                        Case{22, {0.9, 1, 20, 1.3}, 20, 22},    // over-selection limited by what is there
                        Case{10, {0.3, 1, 100, 1.1}, 3, 4}}) {  // 1.1 * 3 = 3.3000000000000003 -> 4
    Selection selection = select_devices(devices(c.available), c.config, 1);
    ASSERT_TRUE(selection.ok()) << selection.shortfall;
    EXPECT_EQ(selection.target, c.target) << c.available << " available, fraction " << c.config.fraction;
    EXPECT_EQ(selection.devices.size(), c.selected)
        << c.available << " available, fraction " << c.config.fraction;
    EXPECT_TRUE(std::is_sorted(selection.devices.begin(), selection.devices.end()));
    EXPECT_EQ(std::set<DeviceId>(selection.devices.begin(), selection.devices.end()).size(), c.selected);
  }
}

TEST(Selection, IsDeterministicUnderASeedWhateverTheInputOrder) {
  SelectionConfig config{0.3, 1, 100, 1.0};
  std::vector<DeviceId> ids = devices(50), reversed(ids.rbegin(), ids.rend());
  Selection a = select_devices(ids, config, 42), b = select_devices(reversed, config, 42);
  EXPECT_EQ(a.devices, b.devices);
  bool differs = false;
  for (uint64_t seed = 43; seed < 53; ++seed)
    differs |= select_devices(ids, config, seed).devices != a.devices;
  EXPECT_TRUE(differs);
}

TEST(Selection, IsUniform) {
  // 4000 draws of 5 out of 20: each device is chosen with p = 1/4, 1000 times on average, with a
  // standard deviation of sqrt(4000 * 1/4 * 3/4) = 27.4; five of them bound a failure of a fair
  // selector to about 1e-6 per device.
  std::map<DeviceId, int> chosen;
  for (uint64_t seed = 0; seed < 4000; ++seed)
    for (const DeviceId& id : select_devices(devices(20), {0.25, 1, 100, 1.0}, seed).devices) ++chosen[id];
  ASSERT_EQ(chosen.size(), 20u);
  for (const auto& [id, count] : chosen) EXPECT_NEAR(count, 1000, 5 * 27.4) << id;
}

TEST(Selection, SaysSoWhenTooFewAreAvailable) {
  Selection selection = select_devices(devices(3), {0.5, 5, 10, 1.0}, 1);
  EXPECT_FALSE(selection.ok());
  EXPECT_TRUE(selection.devices.empty());
  EXPECT_EQ(selection.shortfall, "3 devices available, at least 5 are needed");
}

TEST(Selection, RefusesBadConfigsAndRepeatedDevices) {
  EXPECT_EQ(message_of<Refused>([] {
              select_devices({"a", "b", "a"}, {}, 1);
            }),
            "selection: device 'a' is listed twice among the available devices");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0, 1, 2, 1.0}, 1);
            }),
            "selection: fraction 0.000000 is outside (0, 1]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {1.5, 1, 2, 1.0}, 1);
            }),
            "selection: fraction 1.500000 is outside (0, 1]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 0, 2, 1.0}, 1);
            }),
            "selection: min_devices must be at least 1");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 3, 2, 1.0}, 1);
            }),
            "selection: max_devices 2 is below min_devices 3");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 1, 2, 0.9}, 1);
            }),
            "selection: over_selection 0.900000 must be a finite factor of at least 1");
}

}  // namespace
}  // namespace tn::federated
