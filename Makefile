# The README's two commands: `make demo` and `make test`. `make setup` alone is idempotent.
PYTHON      := /usr/bin/python3
BUILD       := build
VENV        := .venv
UPSTREAM    := /usr/lib/python3/dist-packages
SITE        := $(VENV)/lib/python3.11/site-packages
APT_PACKAGES := cmake ninja-build g++ python3-dev python3-venv python3-yaml python3-numpy \
                python3-pytest python3-torch python3-torchvision python3-sklearn \
                libopenblas-dev liblapack-dev libsleef-dev libgtest-dev clang-format \
                libasio-dev pybind11-dev libgrpc++-dev protobuf-compiler-grpc protobuf-compiler \
                libprotobuf-dev libsodium-dev nlohmann-json3-dev libsqlite3-dev zlib1g-dev \
                dataset-fashion-mnist

.PHONY: setup build demo test asan-test bench system-packages clean

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

# The federated executables, linked into $(VENV)/bin.
TOOLS       := $(BUILD)/server/coordinator/torchnative-coordinator $(BUILD)/server/admin/torchnative-admin \
               $(BUILD)/client/torchnative-device

# The venv sees Debian's packages (numpy, torchvision) but our torch comes first on sys.path.
$(VENV)/.assembled: $(BUILD)/shim/libtorch_global_deps.so $(BUILD)/shim/torch_shm_manager $(wildcard $(BUILD)/shim/_C*.so) scripts/assemble_torch.py $(TOOLS) \
                    $(wildcard $(BUILD)/python/torchnative/_device*.so) $(wildcard python/torchnative/*.py)
	$(PYTHON) scripts/assemble_torch.py $(UPSTREAM) $(BUILD)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv --system-site-packages --without-pip $(VENV)
	ln -sfn $(abspath $(BUILD))/pytree/torch $(SITE)/torch
	ln -sfn $(abspath $(BUILD))/pytree/torchgen $(SITE)/torchgen
	for tool in $(abspath $(TOOLS)); do ln -sfn $$tool $(VENV)/bin/$$(basename $$tool); done
	# The torchnative package: our Python files next to the extension the build made.
	for file in $(abspath $(wildcard python/torchnative/*.py)); do ln -sfn $$file $(BUILD)/python/torchnative/; done
	ln -sfn $(abspath $(BUILD))/python/torchnative $(SITE)/torchnative
	touch $@

demo: setup
	$(VENV)/bin/python examples/train_digits.py

test: setup asan-test
	ctest --test-dir $(BUILD) --output-on-failure -j2
	$(VENV)/bin/python -m pytest -q tests/python tests/distributed tests/golden tests/federated

# The C++ unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
asan-test: system-packages
	test -f build-asan/build.ninja || cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTORCHNATIVE_SANITIZE=ON
	ninja -C build-asan -j2 shim_core_test process_group_test distributed_store_test archive_test federated_test proto_test server_state_test coordinator_test client_test
	ctest --test-dir build-asan --output-on-failure

bench: setup
	$(PYTHON) bench/shim_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/distributed_bench.py --shim $(VENV)/bin/python --upstream $(PYTHON)
	$(PYTHON) bench/federated_bench.py --bin $(VENV)/bin

clean:
	rm -rf $(BUILD) build-asan $(VENV)
