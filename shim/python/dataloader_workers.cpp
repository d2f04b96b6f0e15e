// What torch.utils.data's multi-process loader asks of torch._C: the pids of each loader's
// workers (_set_worker_pids, _remove_worker_pids), a check that none of them died
// (_error_if_any_worker_fails, called from the loader's SIGCHLD handler and while it waits),
// and the signal handlers a worker installs (_set_worker_signal_handlers), so that a worker
// killed by a fault says so on stderr and its parent reports it as upstream's does.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>

#include "python_shim.h"

namespace tn::py {

namespace {

std::map<long long, std::set<pid_t>>& worker_pids() {
  static std::map<long long, std::set<pid_t>> pids;
  return pids;
}

PyObject* f_set_worker_pids(PyObject*, PyObject* args) {
  if (PyTuple_GET_SIZE(args) != 2) {
    PyErr_SetString(PyExc_TypeError, "_set_worker_pids expects exactly 2 arguments.");
    return nullptr;
  }
  long long loader = PyLong_AsLongLong(PyTuple_GET_ITEM(args, 0));
  if (loader == -1 && PyErr_Occurred()) return nullptr;
  if (worker_pids().count(loader)) {
    PyErr_SetString(PyExc_ValueError,
                    "_set_worker_pids should be called only once for each _BaseDataLoaderIter.");
    return nullptr;
  }
  PyObject* pids = PyTuple_GET_ITEM(args, 1);
  if (!PyTuple_Check(pids)) {
    PyErr_Format(PyExc_TypeError, "_set_worker_pids expects a tuple for child_pids, but got %s.",
                 Py_TYPE(pids)->tp_name);
    return nullptr;
  }
  std::set<pid_t> workers;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pids); ++i) {
    long long pid = PyLong_AsLongLong(PyTuple_GET_ITEM(pids, i));
    if (pid == -1 && PyErr_Occurred()) return nullptr;
    workers.insert(pid_t(pid));
  }
  worker_pids()[loader] = std::move(workers);
  Py_RETURN_NONE;
}

PyObject* f_remove_worker_pids(PyObject*, PyObject* arg) {
  long long loader = PyLong_AsLongLong(arg);
  if (loader == -1 && PyErr_Occurred()) return nullptr;
  if (!worker_pids().erase(loader)) {
    PyErr_Format(PyExc_ValueError, "Cannot find worker information for _BaseDataLoaderIter with id %lld",
                 loader);
    return nullptr;
  }
  Py_RETURN_NONE;
}

// The first registered worker that exited with an error or was killed, as upstream words it;
// "" if none. The child is not reaped (WNOWAIT): multiprocessing still collects its status.
// A reported loader's pids are forgotten, so the other workers' deaths it causes are not.
std::string failed_worker() {
  for (auto& [loader, pids] : worker_pids())
    for (pid_t pid : pids) {
      siginfo_t info{};
      if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) continue;
      std::string worker = "DataLoader worker (pid " + std::to_string(pid) + ") ";
      if (info.si_code == CLD_EXITED && info.si_status != EXIT_SUCCESS) {
        pids.clear();
        return worker + "exited unexpectedly with exit code " + std::to_string(info.si_status) +
               ". Details are lost due to multiprocessing. Rerunning with num_workers=0 may give better "
               "error trace.";
      }
      if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
        pids.clear();
        std::string message = worker + "is killed by signal: " + strsignal(info.si_status) + ". ";
        if (info.si_status == SIGBUS)
          message +=
              "It is possible that dataloader's workers are out of shared memory. Please try to raise "
              "your shared memory limit.";
        return message;
      }
    }
  return "";
}

PyObject* f_error_if_any_worker_fails(PyObject*, PyObject*) {
  std::string failure = failed_worker();
  if (failure.empty()) Py_RETURN_NONE;
  PyErr_SetString(PyExc_RuntimeError, failure.c_str());
  return nullptr;
}

// A worker's fault: say which on stderr, then die of the signal with its default action,
// so that the parent sees the signal.
template <int Signal>
void report_and_reraise(int, siginfo_t*, void*) {
  static constexpr const char* messages[] = {
      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
      "(shm).\n",
      "ERROR: Unexpected segmentation fault encountered in worker.\n",
      "ERROR: Unexpected floating-point exception encountered in worker.\n"};
  const char* message = messages[Signal == SIGBUS ? 0 : Signal == SIGSEGV ? 1 : 2];
  ssize_t written = write(STDERR_FILENO, message, strlen(message) + 1);  // upstream writes the NUL too
  (void)written;
  signal(Signal, SIG_DFL);
  ::raise(Signal);
}

// SIGTERM from the parent is the loader shutting its workers down: exit quietly, so the
// parent's SIGCHLD check reports nothing. From anyone else it kills as by default.
void terminate_quietly_for_parent(int, siginfo_t* info, void*) {
  if (info->si_pid == getppid()) _exit(EXIT_SUCCESS);
  signal(SIGTERM, SIG_DFL);
  ::raise(SIGTERM);
}

bool install(int signal_number, void (*handler)(int, siginfo_t*, void*)) {
  struct sigaction action {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_RESTART | SA_SIGINFO | SA_NOCLDSTOP | SA_NODEFER;
  if (sigemptyset(&action.sa_mask) == 0 && sigaction(signal_number, &action, nullptr) == 0) return true;
  PyErr_Format(PyExc_RuntimeError, "An error occurred while setting handler for %s.",
               strsignal(signal_number));
  return false;
}

PyObject* f_set_worker_signal_handlers(PyObject*, PyObject*) {
  if (!install(SIGBUS, report_and_reraise<SIGBUS>) || !install(SIGSEGV, report_and_reraise<SIGSEGV>) ||
      !install(SIGTERM, terminate_quietly_for_parent) || !install(SIGFPE, report_and_reraise<SIGFPE>))
    return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef worker_functions[] = {
    {"_set_worker_pids", f_set_worker_pids, METH_VARARGS, nullptr},
    {"_remove_worker_pids", f_remove_worker_pids, METH_O, nullptr},
    {"_error_if_any_worker_fails", f_error_if_any_worker_fails, METH_NOARGS, nullptr},
    {"_set_worker_signal_handlers", f_set_worker_signal_handlers, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void init_dataloader_workers(PyObject* module) {
  if (PyModule_AddFunctions(module, worker_functions) < 0) throw PythonErrorSet();
}

}  // namespace tn::py
