// The neighbour graph: degree and threshold against the values the paper's authors publish with
// their implementation, and the random Harary graph's shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

struct Expected {
  uint32_t devices;
  double corrupt, dropout;
  bool active;
  uint32_t degree, threshold;
};

// Precomputed by Google's federated compute platform (fcp/secagg/server/
// graph_parameter_finder_test.cc, Apache 2.0), the SecAgg+ authors' implementation, at 40 bits of
// security and 20 of correctness; the rows up to 10,000 devices (the larger ones only cost time),
// but for the one below (TheFloorOfTwoKeepsCorrectness).
const Expected kPublished[] = {
    {100, 0.45, 0.45, false, 92, 46},    {1000, 0.45, 0.45, false, 822, 417},
    {10, 0.33, 0.33, false, 8, 4},       {100, 0.33, 0.33, false, 68, 34},
    {1000, 0.33, 0.33, false, 286, 150}, {10000, 0.33, 0.33, false, 422, 221},
    {100, 0.3, 0.3, true, 92, 62},       {1000, 0.3, 0.3, true, 872, 584},
    {100, 0.05, 0.33, false, 28, 6},     {1000, 0.05, 0.33, false, 72, 24},
    {10000, 0.05, 0.33, false, 86, 29},  {10, 0.05, 0.33, true, 8, 5},
    {100, 0.05, 0.33, true, 72, 39},     {1000, 0.05, 0.33, true, 398, 223},
    {10000, 0.05, 0.33, true, 746, 420}, {10, 0.33, 0.05, false, 4, 4},
    {100, 0.33, 0.05, false, 34, 29},    {1000, 0.33, 0.05, false, 78, 60},
    {10000, 0.33, 0.05, false, 92, 70},  {100, 0.33, 0.05, true, 42, 37},
    {1000, 0.33, 0.05, true, 132, 109},  {10, 0.05, 0.05, false, 2, 2},
    {100, 0.05, 0.05, false, 12, 6},     {1000, 0.05, 0.05, false, 30, 17},
    {10000, 0.05, 0.05, false, 34, 20},  {100, 0.05, 0.05, true, 16, 11},
    {1000, 0.05, 0.05, true, 52, 37},    {10000, 0.05, 0.05, true, 62, 44},
    {100, 0.33, 0.0, false, 26, 25},     {1000, 0.33, 0.0, false, 38, 36},
    {1000, 0.33, 0.0, true, 38, 37},     {1000, 0.0, 0.33, false, 38, 2},
    {1000, 0.0, 0.33, true, 228, 115},   {1000, 0.0, 0.0, false, 2, 2},
    {1000, 0.0, 0.0, true, 2, 2},
};

TEST(SecAggGraph, ParametersMatchTheAuthorsPublishedValues) {
  for (const Expected& row : kPublished) {
    ThreatModel threat{row.corrupt, row.dropout, 40, 20, row.active};
    GraphParameters derived = derive_graph_parameters(row.devices, threat);
    EXPECT_EQ(derived.devices, row.devices);
    EXPECT_EQ(derived.degree, row.degree) << row.devices << " devices, " << row.corrupt << " corrupt, "
                                          << row.dropout << " dropout, active " << row.active;
    EXPECT_EQ(derived.threshold, row.threshold) << row.devices << " devices, " << row.corrupt << " corrupt, "
                                                << row.dropout << " dropout, active " << row.active;
  }
}

// Published: degree 4, threshold 2 for 10 devices, 5% corrupt, 33% dropout. There the corrupt
// bound alone gives threshold 1, raised to the floor of 2; but with 7 of 10 surviving, a device
// of degree 4 keeps fewer than 2 surviving neighbours with probability C(7,1) C(3,3) / C(10,4) =
// 1/30, far above 2^-20 / 10. The authors' finder checks correctness before applying the floor;
// here it is checked after, so degree 6 (at least 3 surviving neighbours always) is the answer.
TEST(SecAggGraph, TheFloorOfTwoKeepsCorrectness) {
  GraphParameters derived = derive_graph_parameters(10, {0.05, 0.33, 40, 20, false});
  EXPECT_EQ(derived.degree, 6u);
  EXPECT_EQ(derived.threshold, 2u);
}

TEST(SecAggGraph, UnmeetableThreatsAndBadArgumentsRefusedByName) {
  Refusal refusal = refusal_of([] { derive_graph_parameters(1000, {0.5, 0.5, 40, 20, false}); });
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("no degree on 1000 devices meets"), std::string::npos) << refusal.message;
  EXPECT_EQ(refusal_of([] { derive_graph_parameters(2, {}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] {
              derive_graph_parameters(100, {1.0, 0, 40, 20, false});
            }).reason,
            Reason::Parameter);
  EXPECT_EQ(refusal_of([] {
              derive_graph_parameters(100, {0, -0.1, 40, 20, false});
            }).reason,
            Reason::Parameter);
  EXPECT_EQ(refusal_of([] { derive_graph_parameters(100, {0, 0, 0, 20, false}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { NeighbourGraph::random_harary(10, 3, Bytes32{}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { NeighbourGraph::random_harary(10, 10, Bytes32{}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { NeighbourGraph::random_harary(10, 0, Bytes32{}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { NeighbourGraph::random_harary(0, 2, Bytes32{}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { NeighbourGraph::random_harary(1, 0, Bytes32{}); }).reason, Reason::Parameter);
}

void expect_regular_and_symmetric(const NeighbourGraph& graph, uint32_t degree) {
  for (DeviceIndex device = 0; device < graph.devices(); ++device) {
    const std::vector<DeviceIndex>& list = graph.neighbours(device);
    ASSERT_EQ(list.size(), degree) << "device " << device;
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end()));
    EXPECT_EQ(std::set<DeviceIndex>(list.begin(), list.end()).size(), degree) << "device " << device;
    for (DeviceIndex other : list) {
      EXPECT_NE(other, device);
      const std::vector<DeviceIndex>& back = graph.neighbours(other);
      EXPECT_TRUE(std::binary_search(back.begin(), back.end(), device)) << device << " - " << other;
    }
  }
}

TEST(SecAggGraph, RandomHararyIsRegularSymmetricAndSeeded) {
  Bytes32 seed = random_secret();
  NeighbourGraph graph = NeighbourGraph::random_harary(101, 10, seed);
  expect_regular_and_symmetric(graph, 10);
  expect_regular_and_symmetric(NeighbourGraph::random_harary(7, 6, seed), 6);
  expect_regular_and_symmetric(NeighbourGraph::random_harary(8, 7, seed), 7);
  NeighbourGraph again = NeighbourGraph::random_harary(101, 10, seed);
  NeighbourGraph other = NeighbourGraph::random_harary(101, 10, random_secret());
  bool differs = false;
  for (DeviceIndex device = 0; device < 101; ++device) {
    EXPECT_EQ(graph.neighbours(device), again.neighbours(device));
    differs = differs || graph.neighbours(device) != other.neighbours(device);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(refusal_of([&] { graph.neighbours(101); }).reason, Reason::Parameter);
}

TEST(SecAggGraph, NeighboursAreNotARingWindowOfIndices) {
  // Flower's ring takes the indices next to a device's own; here the ring is over a random order.
  NeighbourGraph graph = NeighbourGraph::random_harary(1000, 20, random_secret());
  size_t index_neighbours = 0;
  for (DeviceIndex device = 0; device < 1000; ++device)
    for (DeviceIndex other : graph.neighbours(device))
      index_neighbours += (other + 1000 - device) % 1000 <= 10 || (device + 1000 - other) % 1000 <= 10;
  // A ring window of indices gives all 20,000 (device, neighbour) pairs; a random order about
  // 20,000 * 20 / 999 = 400.
  EXPECT_LT(index_neighbours, 2000u);
}

}  // namespace
}  // namespace tn::federated::secagg
