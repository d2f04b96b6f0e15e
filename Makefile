# The README's two commands: `make demo` and `make test`. `make setup` alone is idempotent.
PYTHON      := /usr/bin/python3
BUILD       := build
VENV        := .venv
UPSTREAM    := /usr/lib/python3/dist-packages
SITE        := $(VENV)/lib/python3.11/site-packages
APT_PACKAGES := cmake ninja-build g++ python3-dev python3-venv python3-yaml python3-numpy \
                python3-pytest python3-pytest-timeout python3-pytest-xdist python3-torch python3-torchvision python3-sklearn \
                python3-matplotlib libopenblas-dev liblapack-dev libsleef-dev libdnnl-dev libgtest-dev clang-format \
                libasio-dev pybind11-dev libgrpc++-dev protobuf-compiler-grpc protobuf-compiler \
                libprotobuf-dev libsodium-dev nlohmann-json3-dev libsqlite3-dev zlib1g-dev \
                dataset-fashion-mnist fortunes systemd openssl patchelf

.PHONY: setup build demo test check zoo cnn-epoch asan-venv asan-test asan-python bench system-packages clean

setup: system-packages build $(VENV)/.assembled

# As root on a fresh machine, install what is missing; elsewhere just check.
system-packages:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "missing Debian packages (run as root or install): $$missing"; exit 1; fi; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: $(BUILD)/build.ninja
	ninja -C $(BUILD) -j2

# $(call assemble,VENV,BUILD): BUILD's torch tree (upstream's Python files, our _C) and the
# torchnative package in a venv that sees Debian's packages (numpy, torchvision) but imports
# our torch first; the CLIs linked into VENV/bin.
define assemble
	$(PYTHON) scripts/assemble_torch.py $(UPSTREAM) $(2)
	test -x $(1)/bin/python3 || $(PYTHON) -m venv --system-site-packages --without-pip $(1)
	ln -sfn $(abspath $(2))/pytree/torch $(1)/lib/python3.11/site-packages/torch
	ln -sfn $(abspath $(2))/pytree/torchgen $(1)/lib/python3.11/site-packages/torchgen
	for tool in $(abspath $(addprefix $(2)/,$(TOOLS))); do ln -sfn $$tool $(1)/bin/$$(basename $$tool); done
	for file in $(abspath $(wildcard python/torchnative/*.py)); do ln -sfn $$file $(2)/python/torchnative/; done
	ln -sfn $(abspath python/torchnative/nn) $(2)/python/torchnative/nn
	ln -sfn $(abspath $(2))/python/torchnative $(1)/lib/python3.11/site-packages/torchnative
endef

# The federated executables, relative to a build directory.
TOOLS       := server/coordinator/torchnative-coordinator server/admin/torchnative-admin client/torchnative-device
# What a venv is assembled from, relative to a build directory.
VENV_INPUTS  = shim/libtorch_global_deps.so shim/torch_shm_manager $(TOOLS)

$(VENV)/.assembled: $(addprefix $(BUILD)/,$(VENV_INPUTS)) $(wildcard $(BUILD)/shim/_C*.so) scripts/assemble_torch.py \
                    $(wildcard $(BUILD)/python/torchnative/_device*.so) $(wildcard python/torchnative/*.py) \
                    $(wildcard python/torchnative/nn/*.py)
	$(call assemble,$(VENV),$(BUILD))
	touch $@

# The main job (docs/demo.md): 10 FedAvg rounds of 8 device processes on Fashion-MNIST through
# torchnative-coordinator, against centralised training and against peers averaging over
# torch.distributed, then test-time adaptation of the federated model to corrupted test images,
# and a GPT-style model fine-tuned on fortune files; its tables, results.json and PNG plots in
# $(BUILD)/demo. 6 min 0 s measured after set-up on 2 shared cores (docs/demo.md).
demo: setup
	$(VENV)/bin/python examples/demo/run_demo.py --out $(BUILD)/demo

# Seconds per C++ test: the slowest takes 4.4 s on the release build (docs/measurements.md), the
# sanitizer build's run slower. pytest's bounds are in pytest.ini and tests/bounded.py.
CTEST       := ctest --output-on-failure --timeout 60

# Upstream's records of the golden cases, computed once for all the golden runs of make test
# and make check (tests/golden/run.py, upstream_pass: keyed by the catalog, the harness and
# upstream's torch).
GOLDEN_CACHE := $(abspath $(BUILD))/golden-cache

# make test's Python suites run on two pytest workers, a test file each at a time (its module
# fixtures run once): many tests wait on processes they started (docs/measurements.md).
PYTEST_WORKERS := -n 2 --dist loadfile

test: setup asan-test asan-python
	$(CTEST) --test-dir $(BUILD) -j2
	GOLDEN_CACHE=$(GOLDEN_CACHE) $(VENV)/bin/python -m pytest -q $(PYTEST_WORKERS) tests/harness tests/python tests/distributed \
	    tests/golden tests/zoo tests/federated tests/deploy

# The torchvision zoo (docs/zoo.md): every classifier builder of Debian's torchvision, an eval
# forward and a training step on upstream's weights, the shim against upstream; make test runs
# seven of them, of families the training steps of test_autograd do not reach (tests/zoo/test_zoo.py).
zoo: setup
	$(PYTHON) tests/zoo/zoo.py --shim $(VENV)/bin/python --upstream $(PYTHON) --report $(BUILD)/zoo.md

# One epoch of the Fashion-MNIST BatchNorm CNN on upstream (float32, float64) and the shim, and
# their test accuracy (issue 18 point 4; bench/cnn_epoch.py, docs/measurements.md). About 3 min.
cnn-epoch: setup
	$(PYTHON) bench/cnn_epoch.py --shim $(VENV)/bin/python --upstream $(PYTHON)

# The fast loop for a change (README): the release build's C++ tests, tests/python, a stratified
# sample of the golden cases (every operator and aliasing family), the federated suites' quick cases.
check: setup
	$(CTEST) --test-dir $(BUILD) -j2
	GOLDEN_CACHE=$(GOLDEN_CACHE) $(PYTHON) tests/golden/run.py --sample --shim $(abspath $(VENV))/bin/python
	$(VENV)/bin/python -m pytest -q -m "not slow" tests/harness tests/python tests/federated

# The sanitizer build: every target under AddressSanitizer and UndefinedBehaviorSanitizer.
ASAN_BUILD  := build-asan
ASAN_VENV   := .venv-asan
# Every sanitizer report of the Python suites is written here; a file here fails the run.
ASAN_REPORTS := $(abspath $(ASAN_BUILD))/reports

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORCHNATIVE_SANITIZE=ON

# The venv's python3 is a copy of Debian's interpreter that loads the sanitizer runtime first
# (the interpreter itself is not instrumented, and ASan must be the first library loaded); its
# python sets the sanitizers' options (scripts/sanitized_python.in). rm first: the venv made
# bin/python and bin/python3 symlinks to Debian's interpreter, which must not be written through.
asan-venv: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD) -j2
	$(call assemble,$(ASAN_VENV),$(ASAN_BUILD))
	rm -f $(ASAN_VENV)/bin/python $(ASAN_VENV)/bin/python3
	cp $$(readlink -f $(PYTHON)) $(ASAN_VENV)/bin/python3
	patchelf --add-needed $$($(CXX) -print-file-name=libstdc++.so.6) $(ASAN_VENV)/bin/python3
	patchelf --add-needed $$($(CXX) -print-file-name=libasan.so) $(ASAN_VENV)/bin/python3
	sed -e "s|@REPORTS@|$(ASAN_REPORTS)|" scripts/sanitized_python.in > $(ASAN_VENV)/bin/python
	chmod +x $(ASAN_VENV)/bin/python

# The C++ unit tests on the sanitizer build (part of make test).
ASAN_TESTS  := shim_core_test process_group_test distributed_store_test archive_test federated_test proto_test \
               server_state_test coordinator_test client_test cli_test
asan-test: system-packages $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD) -j2 $(ASAN_TESTS)
	$(CTEST) --test-dir $(ASAN_BUILD) -j2

# The Python suites (the golden harness's shim side included) on the sanitizer build of
# torch._C; any report, from any process, fails the run (part of make test). The self-tests
# that run upstream alone (marked upstream_only) gain nothing from it: the release run has them.
# The golden comparison runs its stratified sample here (every operator, aliasing family and
# dtype stratum); the release run compares the whole catalog.
asan-python: system-packages asan-venv
	rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS)
	GOLDEN_CACHE=$(GOLDEN_CACHE) GOLDEN_SHIM=$(abspath $(ASAN_VENV))/bin/python GOLDEN_SAMPLE=1 \
	    $(ASAN_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) \
	    -m "not slow and not upstream_only" tests/python tests/golden; status=$$?; \
	if [ -n "$$(ls -A $(ASAN_REPORTS))" ]; then cat $(ASAN_REPORTS)/*; echo "sanitizer reports: $(ASAN_REPORTS)"; exit 1; fi; \
	exit $$status

bench: setup
	$(PYTHON) bench/shim_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/autograd_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/ops_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/models_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/distributed_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/federated_bench.py --bin $(VENV)/bin

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(VENV) $(ASAN_VENV)
