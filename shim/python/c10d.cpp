// torch._C._distributed_c10d on the distributed/ library, so the unmodified upstream
// torch.distributed runs with backend="local": the module's constants, error translation and
// backend registration; each part's classes are bound in its own file (see c10d.h).
#include "c10d.h"

#include <pybind11/chrono.h>
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>

#include "python_shim.h"

namespace py = pybind11;

namespace tn::py {
namespace {

void set_error_translation() {
  // Library errors surface as RuntimeError, as c10d's do; argument errors the same way upstream
  // raises them (RuntimeError), with our message naming what is wrong.
  ::py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const tn::dist::DistError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const tn::Error& e) {
      set_python_error(e);
    }
  });
}

const char* kRegisterBackend = R"PY(
import importlib.abc, importlib.machinery, sys

def install(create):
    # torch.distributed learns of third-party backends through Backend.register_backend,
    # which exists only once torch/distributed/distributed_c10d.py has run: register "local"
    # the moment that module finishes loading, without touching upstream's files.
    target = "torch.distributed.distributed_c10d"
    if target in sys.modules:
        sys.modules[target].Backend.register_backend("local", create)
        return

    class RegisterLocalBackend(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target_module=None):
            if fullname != target:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.Backend.register_backend("local", create)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, RegisterLocalBackend())
)PY";

}  // namespace

void init_c10d(PyObject* root_module, PyObject* c10d_module) {
  using namespace c10d;
  auto m = ::py::reinterpret_borrow<::py::module_>(c10d_module);
  set_error_translation();
  // Upstream's values: 30 minutes for a group, -1 ms for "no timeout" on Work.wait.
  m.attr("_DEFAULT_PG_TIMEOUT") = ::py::cast(Milliseconds(30 * 60 * 1000));
  m.attr("_DEFAULT_NO_TIMEOUT") = ::py::cast(kNoTimeout);

  bind_options(m);
  bind_stores(m);
  bind_work(m);
  bind_process_groups(m);

  // DistributedDataParallel and FullyShardedDataParallel call this first; refusing here names
  // what is missing before they reach the Reducer.
  m.def("_verify_params_across_processes", [](::py::args, ::py::kwargs) {
    throw NotImplemented(
        "DistributedDataParallel and FullyShardedDataParallel are not supported by torchnative: they need "
        "c10d's Reducer (bucketed gradient all_reduce driven by autograd hooks) and autograd. Average "
        "gradients with torch.distributed.all_reduce after backward instead.");
  });

  // torch.distributed.is_available() is True once this exists; it also registers "local".
  static PyMethodDef c10d_init_def = {"_c10d_init",
                                      [](PyObject*, PyObject*) -> PyObject* {
                                        try {
                                          ::py::dict scope;
                                          ::py::exec(kRegisterBackend, scope);
                                          auto module = ::py::module_::import("torch._C._distributed_c10d");
                                          scope["install"](module.attr("ProcessGroupLocal"));
                                          Py_RETURN_TRUE;
                                        } catch (::py::error_already_set& error) {
                                          error.restore();
                                          return nullptr;
                                        }
                                      },
                                      METH_NOARGS, nullptr};
  PyModule_AddObject(root_module, "_c10d_init", PyCFunction_NewEx(&c10d_init_def, nullptr, nullptr));
}

}  // namespace tn::py
