// What is particular to the prefix store: isolation, nesting, its own timeout.
#include "store_test_util.h"

namespace tn::dist {
namespace {

TEST(PrefixStore, KeysAreIsolatedByPrefix) {
  auto inner = make_hash_store(kShortTimeout);
  auto alpha = make_prefix_store("alpha", inner);
  auto beta = make_prefix_store("beta", inner);
  alpha->set("key", bytes_of("a"));
  beta->set("key", bytes_of("b"));
  EXPECT_EQ(text_of(alpha->get("key")), "a");
  EXPECT_EQ(text_of(beta->get("key")), "b");
  EXPECT_EQ(text_of(inner->get("alpha/key")), "a");
  EXPECT_FALSE(inner->check({"key"}));
  alpha->set("only_alpha", bytes_of("1"));
  EXPECT_FALSE(beta->check({"only_alpha"}));
  EXPECT_THROW(beta->get("only_alpha"), TimeoutError);
}

TEST(PrefixStore, PrefixesNest) {
  auto inner = make_hash_store(kGenerousTimeout);
  auto outer = make_prefix_store("b", make_prefix_store("a", inner));
  outer->add("n", 1);
  EXPECT_EQ(text_of(inner->get("a/b/n")), "1");
}

TEST(PrefixStore, PrefixOfAndInnerOf) {
  auto inner = make_hash_store();
  auto prefixed = make_prefix_store("group", inner);
  EXPECT_EQ(prefix_of(*prefixed), "group");
  EXPECT_EQ(inner_of(*prefixed), inner);
  EXPECT_EQ(prefix_of(*inner), "");
  EXPECT_EQ(inner_of(*inner), nullptr);
}

TEST(PrefixStore, UsesItsOwnTimeout) {
  auto inner = make_hash_store(kGenerousTimeout);
  auto prefixed = make_prefix_store("group", inner);
  prefixed->set_timeout(kShortTimeout);
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([&] { prefixed->get("missing"); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("'group/missing'"), std::string::npos) << message;
}

TEST(PrefixStore, NullInnerIsInvalid) { EXPECT_THROW(make_prefix_store("p", nullptr), InvalidArgument); }

}  // namespace
}  // namespace tn::dist
