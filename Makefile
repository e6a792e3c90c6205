# Quickstart:  make demo   (lab up + site.yml + summary)     make test   (the whole suite)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
VENV ?= .venv
LAB_NODES ?= 2
# A separate Slurm head node (lab-head) beside the compute nodes.
LAB_HEAD ?= true
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_DEPRECATION_WARNINGS := False
export ANSIBLE_FORCE_COLOR := $(if $(CI),0,1)
# Debian packages the control host needs for the lab and the tests. Podman 4.3 runs CNI networks, whose
# containers resolve each other's names only through the dnsname plugin. squashfs-tools' mksquashfs packs the
# benchmark image into the SquashFS file Charliecloud runs (the role's convert-image.sh takes ch-convert's steps:
# charliecloud-builders would bring a Docker engine, docker.io, and buildah for nothing).
HOST_PACKAGES := podman runc mmdebstrap rsync uidmap slirp4netns git openssh-client python3-venv ca-certificates \
  golang-github-containernetworking-plugin-dnsname squashfs-tools

.PHONY: help docs deps demo-deps host-deps lab-image lab-up lab-down demo test lint unit molecule e2e e2e-image bench bench-stack bench-campaign image image-push screenshots apiserver-deps apiserver apiserver-check gpu-record clean distclean

help:
	@echo "make demo      bring the lab up and run site.yml end to end (ends with the benchmark summary)"
	@echo "make test      lint, unit tests, molecule scenarios, lab end-to-end"
	@echo "make lint, make unit, make molecule, make e2e   the parts of make test, one at a time"
	@echo "make e2e-image the end-to-end tests that run the benchmark image on this machine's podman, not on the lab"
	@echo "make molecule-<scenario>  one molecule scenario (molecule/<scenario>), then its wall time"
	@echo "make deps      host packages and the control host's venv (.venv) for the tests;  make demo-deps  for site.yml only;  make host-deps  the packages alone"
	@echo "make lab-image build the lab's node image (mmdebstrap, cached)"
	@echo "make lab-up    start LAB_NODES=$(LAB_NODES) compute nodes (+ a head unless LAB_HEAD=false);  make lab-down  remove them"
	@echo "make bench     peer baselines on the lab (after make demo): benchrunner vs Horovod's synthetic benchmark, a plain DDP loop and a plain FSDP2 loop, allreduce sweeps vs iperf3"
	@echo "make image     build the Kubernetes benchmark image (CPU) with podman; make image-push IMAGE=... pushes it"
	@echo "make bench-campaign  per-run overhead of a small campaign on the lab (after make demo): run wall time - job time"
	@echo "make bench-stack  wall time of the bare-metal stack play on 1 vs 3 fresh lab machines (replaces the lab)"
	@echo "make screenshots  headless Chromium screenshots of the run pages of recorded lab results (build/screenshots)"
	@echo "make apiserver    build a real kube-apiserver 1.20.2 from Debian's source (cached; ~20 min the first time);  make apiserver-deps  the packages it builds with"
	@echo "make apiserver-check  apply the kubernetes_resources role and a benchrunner MPIJob to that API server (docs/apiserver.md)"
	@echo "make gpu-record  on one NVIDIA GPU machine, offline: nvidia-smi, facts, GPU checks, PyTorch ResNet-50, the FSDP2 transformer's tokens/s and MFU, the PyTorch peers (build/gpu-record)"
	@echo "make docs      write the schemas' launcher and framework enums and the benchrunner role's choices from the"
	@echo "               registries, then each role's README from its argument specs"
	@echo "make clean     remove results/ and .cache/;  make distclean  also the lab, its node image, the venv and the wheelhouse"

host-deps:
	@missing=$$(for p in $(HOST_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

# PyTorch's CPU build on the control host, for its own tests of the pytorch-ddp path (python_env's version): from
# pip's sources where they hold that build (this machine image's find-links do), else from PyTorch's CPU index
# (about 200 MB); never PyPI's default build, which pulls about 3 GB of CUDA wheels.
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# The control host's environment in three layers, each a stamp: Ansible first (the lab's play needs nothing else),
# then what site.yml and benchrunner need (make demo), then the test tools and PyTorch (make test).
$(VENV)/.ansible: requirements-ansible.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-ansible.txt
	touch $@

# It only adds packages to the first layer, so make demo builds the node image from that layer meanwhile.
$(VENV)/.installed: $(VENV)/.ansible requirements-control.txt benchrunner/pyproject.toml
	$(VENV)/bin/pip install -q -r requirements-control.txt
	$(VENV)/bin/pip install -q --no-build-isolation -e 'benchrunner[control]'
	touch $@

# The tests' own module runs on this machine (the unit suite's plays, molecule's and the e2e's control-host tasks) keep
# the code they compile from their AnsiballZ zips, as the lab's nodes do (roles/lab/files/zipimport_cache.py says
# why): loaded into this venv's Python by a .pth file, from a folder in the venv that only root may write (where make
# runs as another user the folder is that user's, and the cache stays off).
_zipimport_cache_pth := import hpcml_lab_zipimport_cache as c, os, sys; c.install(os.path.join(sys.prefix, "zipimport-cache"))
$(VENV)/.test-installed: $(VENV)/.installed requirements-test.txt roles/lab/files/zipimport_cache.py
	$(VENV)/bin/pip install -q -r requirements-test.txt
	purelib=$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); \
	install -m 0644 roles/lab/files/zipimport_cache.py "$$purelib/hpcml_lab_zipimport_cache.py"; \
	echo '$(_zipimport_cache_pth)' > "$$purelib/hpcml_lab_zipimport_cache.pth"
	install -d -m 0755 $(VENV)/zipimport-cache
	$(VENV)/bin/pip download -q --no-index --no-deps -d $(VENV)/torch-wheel torch==$(TORCH_VERSION)+cpu 2>/dev/null \
	  || $(VENV)/bin/pip download -q --no-deps --index-url $(TORCH_CPU_INDEX) -d $(VENV)/torch-wheel torch==$(TORCH_VERSION)+cpu
	$(VENV)/bin/pip install -q --find-links $(VENV)/torch-wheel torch==$(TORCH_VERSION)+cpu
	touch $@

demo-deps: host-deps $(VENV)/.installed

deps: demo-deps $(VENV)/.test-installed

lab-image: host-deps $(VENV)/.ansible
	ansible-playbook playbooks/lab.yml --tags image

lab-up: host-deps $(VENV)/.ansible
	ansible-playbook playbooks/lab.yml -e lab_nodes=$(LAB_NODES) -e lab_head=$(LAB_HEAD)

lab-down: $(VENV)/.ansible
	ansible-playbook playbooks/lab.yml -e lab_state=absent

# make demo prints a timestamped line as each phase ends, with the seconds since it started, so a run on a fresh
# machine says where its time went; site.yml ends with each role's own time (profile_roles) and its total.
DEMO_START := $(shell date +%s)
demo_phase = echo "make demo: $$(date +%T), $$(( $$(date +%s) - $(DEMO_START) )) s in: $(1)"
# The node image (mmdebstrap: downloads, then one core of dpkg) builds beside the rest of the control host's packages.
demo: host-deps $(VENV)/.ansible
	@$(call demo_phase,host packages and the control host's Ansible ready)
	@echo "make demo: the node image and the control host's packages, side by side (each one's output when it ends)"
	$(MAKE) --no-print-directory -j2 --output-sync=target lab-image $(VENV)/.installed
	@$(call demo_phase,the node image and the control host's packages ready)
	$(MAKE) --no-print-directory lab-up
	@$(call demo_phase,the lab up)
	ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles,ansible.posix.timer ansible-playbook site.yml
	@$(call demo_phase,site.yml done (provisioned and the benchmark run))
	@echo; benchrunner report --results-dir results

# The node image builds beside the rest of the control host's packages, as in make demo (the test tools' layer only
# adds packages, none that the Ansible layer holds): the two steps left about half of the 2 cores idle one after the
# other. Then two lanes, each part's wall time printed as it ends and all of them at the end, so a CI log says where
# the time went. The end-to-end part on the lab is one lane: a chain of lab runs that leaves about half of the 2 cores
# idle once its first site.yml (the one stretch that keeps both busy) has provisioned the lab. The other lane, in a
# session of its own (setsid, so the kernel's autogroups weigh it as one group beside the e2e's controller and the
# lab's containers), takes that idle half: lint, then the molecule scenarios one at a time, python_env's once the e2e's
# first site.yml has ended (the e2e's conftest touches $(E2E_PROVISIONED), ok or not): on a fresh machine that play
# compiles Horovod into the wheelhouse, which python_env's scenario then installs from instead of compiling it again.
# Then the e2e tests that need the benchmark image and not the lab (make e2e-image: the image is built from that
# wheelhouse, and the e2e's frameworks campaign later finds it built), then the unit suite. In fresh clones on
# 2026-11-29: 67 min 28 s with the image's tests in the lab's lane (which ended 8 minutes after this one), 66 min
# 38 s with them here, 65 min 47 s with the node image built beside the packages, 59 min 5 s with what two parts
# did twice done once (docs/testing.md). The second lane's output is printed whole when both have ended, then the
# lines that say what failed and each part's time and verdict, so the tail of a CI log names the failure; any part
# failing fails make test.
TEST_PARTS_LOG := .cache/test-parts.txt
E2E_PROVISIONED := $(CURDIR)/.cache/e2e-provisioned
_molecule_beside_e2e = $(filter-out python_env,$(MOLECULE_SCENARIOS))
test: host-deps $(VENV)/.ansible
	@$(MAKE) --no-print-directory -j2 --output-sync=target lab-image deps
	@rm -f $(TEST_PARTS_LOG) .cache/beside-e2e.log $(E2E_PROVISIONED); mkdir -p .cache; \
	timed() { label=$$1; shift; start=$$(date +%s); rc=0; $(MAKE) --no-print-directory "$$@" || rc=$$?; \
	  verdict=passed; [ $$rc -eq 0 ] || verdict="FAILED (exit $$rc)"; \
	  echo "make test: $$label took $$(( $$(date +%s) - start )) s, $$verdict" | tee -a $(TEST_PARTS_LOG); return $$rc; }; \
	( exec setsid bash -c "$$(declare -f timed); failed=0; timed lint lint || failed=1; \
	    timed 'molecule ($(_molecule_beside_e2e))' molecule MOLECULE_JOBS=1 MOLECULE_SCENARIOS='$(_molecule_beside_e2e)' \
	      || failed=1; \
	    until [ -e $(E2E_PROVISIONED) ]; do sleep 5; done; \
	    timed 'molecule (python_env)' molecule MOLECULE_SCENARIOS=python_env || failed=1; \
	    timed e2e-image e2e-image || failed=1; \
	    timed unit unit || failed=1; exit \$$failed" ) > .cache/beside-e2e.log 2>&1 & beside=$$!; \
	e2e=0; HPCML_E2E_PROVISIONED=$(E2E_PROVISIONED) timed e2e e2e E2E_PYTEST_ARGS=--ignore=$(E2E_IMAGE_TESTS) 2>&1 \
	  | tee .cache/e2e.log || e2e=$$?; \
	touch $(E2E_PROVISIONED); beside_rc=0; wait $$beside || beside_rc=$$?; \
	echo "make test: lint's, molecule's and the unit suite's output (beside e2e):"; cat .cache/beside-e2e.log; \
	echo "make test: what failed, from both lanes' logs (pytest's FAILED and ERROR lines, a molecule phase's Ansible exit, make's errors):"; \
	found=0; grep -hE '^(FAILED|ERROR) [^ ]*::|^CRITICAL Ansible return code|^make(\[[0-9]+\])?: \*\*\*' \
	  .cache/e2e.log .cache/beside-e2e.log || found=$$?; \
	[ $$found -ne 1 ] || echo none; [ $$found -le 1 ] || echo "make test: a lane's log could not be read, see above"; \
	cat $(TEST_PARTS_LOG); [ $$e2e -eq 0 ] && [ $$beside_rc -eq 0 ]

# The last step is ansible-test sanity on hpcml.cluster (about 50 s the first time; its venvs are then cached).
lint: deps
	yamllint --strict .
	ruff check .
	ansible-lint
	ansible-playbook --syntax-check site.yml
	python tools/collection_sanity.py

# One worker per core (pytest-xdist): each test runs alone in its own tmp_path, and on 2 cores one process left about
# half the CPU idle while its ansible-playbook and training subprocesses started up.
unit: deps
	pytest -q -n auto --durations=10 benchrunner/tests tests/unit

# The scenarios run side by side, MOLECULE_JOBS at a time, each on its own containers and podman network. Alone, a
# scenario left 22-52 % of the 2 cores idle, its steps waiting on podman exec and the containers: node_base with
# the container runtime's scenario took 392 s side by side against 430 s one after the other, with python_env 323 s
# against 420 s. In this order, each taking the next free slot: node_layer and python_env (it compiles Horovod while
# the wheel cache is empty), then slurm (it also installs Charliecloud on its compute node), then node_base, the
# shortest, last. node_layer holds the container runtime's roles too since 2026-11-29 (one node, mirror and hardware
# detection instead of two). In a fresh clone on 2026-11-28 (make molecule 1204 s, green): node_layer 498 s,
# python_env 502 s, slurm 455 s, the container runtime's 571 s, node_base 247 s; the 2 cores about 3 % idle
# throughout, so the order matters less than each scenario's own work. Each scenario's output is printed whole when it
# ends (--output-sync), then its wall time; each phase ends with its own (.config/molecule/config.yml).
_molecule_all := $(sort $(patsubst molecule/%/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))
_molecule_first := node_layer python_env slurm
MOLECULE_SCENARIOS := $(foreach s,$(_molecule_first),$(filter $(s),$(_molecule_all))) $(filter-out $(_molecule_first),$(_molecule_all))
MOLECULE_JOBS ?= 2
molecule: lab-image
	$(MAKE) --no-print-directory -j$(MOLECULE_JOBS) --output-sync=target $(addprefix molecule-,$(MOLECULE_SCENARIOS))

molecule-%: deps
	@start=$$(date +%s); molecule test -s $*; echo "molecule: $* took $$(( $$(date +%s) - start )) s"

# From bare nodes every time: a fresh lab, site.yml twice, results checked on the control host.
E2E_IMAGE_TESTS := tests/e2e/test_mpijob_image.py
e2e: deps
	$(MAKE) --no-print-directory lab-down
	$(MAKE) --no-print-directory lab-up
	pytest -q --durations=15 $(E2E_PYTEST_ARGS) tests/e2e

# The MPIJob emulation on this machine's podman, in the benchmark image built from the wheelhouse (make image).
e2e-image: deps
	pytest -q --durations=5 $(E2E_IMAGE_TESTS)

# On a provisioned cluster (make demo): benchrunner against Horovod's synthetic benchmark method, and the allreduce
# sweep's bus bandwidth against iperf3, interleaved on the first two nodes.
bench: deps
	ansible-playbook benchmarks/peers.yml

bench-stack: deps
	benchmarks/baremetal_scaling.sh

# On a provisioned cluster (make demo): a small campaign, and what it spends around each run's job.
bench-campaign: deps
	python benchmarks/campaign_overhead.py

# The Kubernetes stack's benchmark image (CPU), built here on the lab's base with the lab's wheels
# (Horovod already compiled; PyTorch's CPU build, checked against its hash lock). Push it where the cluster pulls
# from and set benchrunner_image.
IMAGE ?= localhost/hpcml-benchrunner:cpu
IMAGE_BASE ?= localhost/hpcml-lab-node:bookworm
WHEELHOUSE ?= $(or $(HPCML_CACHE_DIR),$(HOME)/.cache/hpcml)/wheelhouse/debian12-cp311-x86_64-cpu
# One build at a time (flock, held by the recipe's one shell): make test's lanes may both ask for the image, and the
# second then finds every layer built.
image: lab-image
	mkdir -p .cache; exec 9> .cache/image.lock; flock 9; \
	rm -rf benchrunner/wheels benchrunner/ca-certificates; \
	mkdir -p benchrunner/wheels benchrunner/ca-certificates; \
	if ls $(WHEELHOUSE)/*.whl >/dev/null 2>&1; then cp $(WHEELHOUSE)/*.whl benchrunner/wheels/; fi; \
	cp roles/python_env/files/constraints/tensorflow-2.15.1.txt benchrunner/wheels/constraints.txt; \
	cp roles/python_env/files/locks/torch-2.13.0/cp311-x86_64-cpu.txt benchrunner/wheels/torch-lock.txt; \
	if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then cp /usr/local/share/ca-certificates/*.crt benchrunner/ca-certificates/; fi; \
	podman build -f benchrunner/Containerfile --build-arg BASE_IMAGE=$(IMAGE_BASE) -t $(IMAGE) benchrunner

# make image image-push IMAGE=registry.example.com/hpcml/benchrunner:0.2.0-cpu  (then benchrunner_image: that name)
image-push:
	podman push $(IMAGE)

# The run pages (report.html) of recorded lab results, rendered by today's code and photographed by headless
# Chromium, so what a reader sees is looked at before it ships. SCREENSHOT_RUNS: run folders to use instead.
SCREENSHOT_RUNS ?= benchrunner/tests/fixtures/lab-results
screenshots: deps
	@dpkg-query -W -f='$${Status}\n' chromium 2>/dev/null | grep -q '^install ok installed' || { \
	  echo "installing: chromium"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; }
	python tools/report_screenshots.py --out build/screenshots $(SCREENSHOT_RUNS)

# A real kube-apiserver (Debian bookworm's kubernetes 1.20.2 source, built offline with Debian's Go) and
# Debian's etcd, on loopback: the Kubernetes apply path and benchrunner's MPIJob client against a real server.
APISERVER_PACKAGES := golang-go golang-github-modern-go-reflect2-dev etcd-server dpkg-dev openssl curl
apiserver-deps:
	@$(MAKE) --no-print-directory host-deps HOST_PACKAGES='$(APISERVER_PACKAGES)'

apiserver: apiserver-deps
	tools/apiserver/build.sh

apiserver-check: deps apiserver
	APISERVER_REQUIRED=1 pytest -q tests/apiserver

# On one machine with an NVIDIA GPU and no network, with the PyTorch already there: nvidia-smi's answers, the facts
# modules, the validation play's GPU checks and benchrunner's PyTorch ResNet-50 throughput on 1 GPU, into
# build/gpu-record/<date>-<hostname>/ (or GPU_RECORD_OUT). Installs nothing, so it needs no deps; no training point
# starts or runs past a 510 s budget (--budget-s), which keeps it within 9 minutes. GPU_RECORD_ARGS=--cpu is the dry
# run for a machine without a GPU.
GPU_RECORD_PYTHON ?= python3
gpu-record:
	$(GPU_RECORD_PYTHON) tools/gpu_record.py $(GPU_RECORD_OUT) $(GPU_RECORD_ARGS)

docs: deps
	python tools/registry_enums.py
	python tools/role_readme.py

clean:
	rm -rf .cache results

distclean: lab-down clean
	-podman rmi localhost/hpcml-lab-node:bookworm
	rm -rf $(VENV) $${HPCML_CACHE_DIR:-$$HOME/.cache/hpcml}
