// Derivatives of sorting and the selections by rank (kernels/sorting.cpp): each value's
// gradient goes back to the position it came from; the indices have none.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::sort", "SortBackward0", SAVES_RESULT(),
              { return {to_selected(g[0], s.result(1), s.args().integer(1), true, s.input_sizes(0))}; });
TN_DERIVATIVE("aten::sort.stable", "SortBackward1", SAVES_RESULT(),
              { return {to_selected(g[0], s.result(1), s.args().integer(2), true, s.input_sizes(0))}; });
TN_DERIVATIVE("aten::topk", "TopkBackward0", SAVES_RESULT(),
              { return {to_selected(g[0], s.result(1), s.args().integer(2), true, s.input_sizes(0))}; });
TN_DERIVATIVE("aten::kthvalue", "KthvalueBackward0", SAVES_RESULT(), {
  return {to_selected(g[0], s.result(1), s.args().integer(2), s.args().boolean(3), s.input_sizes(0))};
});
#define TN_SELECTED_ALONG_DIM(OP, NODE)                                                                  \
  TN_DERIVATIVE(OP, NODE, SAVES_RESULT(), {                                                              \
    return {to_selected(g[0], s.result(1), s.args().integer(1), s.args().boolean(2), s.input_sizes(0))}; \
  })
TN_SELECTED_ALONG_DIM("aten::median.dim", "MedianBackward1");
TN_SELECTED_ALONG_DIM("aten::nanmedian.dim", "NanmedianBackward1");
TN_SELECTED_ALONG_DIM("aten::mode", "ModeBackward0");
#undef TN_SELECTED_ALONG_DIM
// The median of all elements: shared by the elements equal to it.
TN_DERIVATIVE("aten::median", "MedianBackward0", SAVES_RESULT(0),
              { return {evenly_distributed(g[0], s.input(0), s.result())}; });
TN_DERIVATIVE("aten::nanmedian", "NanmedianBackward0", SAVES_RESULT(0),
              { return {evenly_distributed(g[0], s.input(0), s.result())}; });

}  // namespace tn::autograd
