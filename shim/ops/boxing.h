// Boxing C++ values into the door's Stack and back, for the generated typed API
// (typed_ops.cpp): each typed function is one call_boxed and one unbox.
#pragma once

#include <tuple>
#include <utility>

#include "ops.h"

namespace tn::ops {

// The operator `full_name` ("aten::add.Tensor"), looked up once per typed function.
const Operator& operator_named(const char* full_name);

inline IValue box(const Tensor& t) { return IValue(t); }
inline IValue box(int64_t v) { return IValue(v); }
inline IValue box(double v) { return IValue(v); }
inline IValue box(bool v) { return IValue(v); }
inline IValue box(const Scalar& s) { return IValue(s); }
inline IValue box(const std::string& s) { return IValue(s); }
inline IValue box(ScalarType t) { return IValue(int64_t(t)); }  // dtypes travel as upstream's numbers
inline IValue box(MemoryFormat f) { return IValue(int64_t(f)); }
inline IValue box(Generator* g) { return g ? IValue(g) : IValue(); }
template <typename T>
IValue box(const std::vector<T>& v) {
  return IValue(v);
}
template <typename T>
IValue box(const std::optional<T>& v) {
  return v ? box(*v) : IValue();
}

template <typename... Args>
Stack call_boxed(const Operator& op, const Args&... args) {
  Stack stack{box(args)...};
  Dispatcher::instance().call(op, stack);
  return stack;
}

template <typename T>
T unbox(const Stack& stack, size_t i) {
  const IValue& v = stack.at(i);
  if constexpr (std::is_same_v<T, ScalarType>) {
    return ScalarType(v.get<int64_t>());
  } else if constexpr (std::is_same_v<T, Scalar>) {
    return Args(const_cast<Stack&>(stack)).scalar(i);
  } else if constexpr (std::is_same_v<T, Tensor>) {
    // A Tensor result its kernel left undefined is None on the stack, as upstream's undefined
    // tensors reach Python (convolution_backward's gradients output_mask did not ask for).
    return v.is_none() ? Tensor() : v.get<Tensor>();
  } else {
    return v.get<T>();
  }
}

template <typename... Ts, size_t... I>
std::tuple<Ts...> unbox_tuple(const Stack& stack, std::index_sequence<I...>) {
  return {unbox<Ts>(stack, I)...};
}
template <typename... Ts>
std::tuple<Ts...> unbox_tuple(const Stack& stack) {
  return unbox_tuple<Ts...>(stack, std::index_sequence_for<Ts...>{});
}

}  // namespace tn::ops
