#include "common.h"

namespace tn {

namespace {
// Upstream's combine_categories: a lower-ranked group only matters when it is of a
// higher category (e.g. a float number with an integer tensor).
ScalarType combine(ScalarType higher, ScalarType lower) {
  if (is_floating(higher)) return higher;
  if (higher == ScalarType::Bool || is_floating(lower)) return promote_types(higher, lower);
  if (higher != ScalarType::Undefined) return higher;
  return lower;
}
}  // namespace

void ResultType::add(const Tensor& t) {
  if (t.impl()->wrapped_number) {
    ScalarType s = t.dtype();
    if (is_floating(s)) s = default_dtype();
    wrapped_ = promote_types(wrapped_, s);
  } else if (t.dim() == 0) {
    zero_ = promote_types(zero_, t.dtype());
  } else {
    dim_ = promote_types(dim_, t.dtype());
  }
}

void ResultType::add(const Scalar& s) {
  ScalarType t = s.is_float() ? default_dtype() : s.type();
  wrapped_ = promote_types(wrapped_, t);
}

ScalarType ResultType::get() const { return combine(dim_, combine(zero_, wrapped_)); }

ScalarType result_type(const Tensor& a, const Tensor& b) {
  ResultType r;
  r.add(a);
  r.add(b);
  return r.get();
}

ScalarType float_type(ScalarType t) { return is_floating(t) ? t : default_dtype(); }

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape strides(shape.size(), 0);
  int64_t offset = int64_t(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] != 1) strides[d + offset] = t.strides()[d];
  return strides;
}

IValue call_op(const std::string& qualified_name, const std::string& overload, Stack args) {
  Operator* op = Dispatcher::instance().find(qualified_name, overload);
  if (!op) throw Error("internal: unknown operator " + qualified_name + "." + overload);
  Dispatcher::instance().call(*op, args);
  return args.empty() ? IValue() : args[0];
}

Tensor call_tensor_op(const std::string& qualified_name, const std::string& overload, Stack args) {
  return std::get<Tensor>(call_op(qualified_name, overload, std::move(args)).value);
}

Tensor scalar_tensor(const Scalar& s) {
  Tensor t = Tensor::empty({}, s.type());
  TN_DISPATCH_ALL_TYPES(t.dtype(), "scalar_tensor", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_); *t.data_as<scalar_t>() = s.to<scalar_t>(); });
  t.impl()->wrapped_number = true;
  return t;
}

}  // namespace tn
