# Iris: the one place build and test commands live. CI runs `just test` (README, .ci/run).
# Run it without installing just: `npx --yes rust-just@1.57.0 <recipe>`.
set shell := ["bash", "-euo", "pipefail", "-c"]
set export

root := justfile_directory()
modules := ". sdk-wasm plugins"
families := "qwen2_5_vl qwen3_vl internvl phi4_multimodal locateanything lance deepseek_ocr2"
tags := env("IRIS_TAGS", "")

# cgo finds libtokenizers.a (built by `just setup`) here.
CGO_LDFLAGS := "-L" + root + "/.build/lib"
GOFLAGS := "-buildvcs=false"
# encoding/json on the v2 implementation: parsing a chat body (mostly a base64 image) is 2x faster
# (docs/perf.md); the whole test suite runs with it, as the shipped binary does.
GOEXPERIMENT := env("GOEXPERIMENT", "jsonv2")

import 'just/tokenizer.just'
import 'just/gateway.just'
import 'just/pixels.just'
import 'just/plugins.just'
import 'just/engine.just'
import 'just/profile.just'
import 'just/gpu.just'
import 'just/test.just'
import 'just/deploy.just'
import 'just/checks.just'

default:
    @just --list

# Fetch and build every input the build needs (cached under .build/).
setup:
    scripts/setup-tokenizers.sh
    scripts/unpack-fixtures.sh
    scripts/fetch-tokenizer.sh
    python3 scripts/reference/internvl_tokenizer.py
    python3 scripts/reference/phi4_tokenizer.py
    python3 scripts/reference/locateanything_tokenizer.py
    python3 scripts/reference/deepseek_ocr2_tokenizer.py

# Developer tools (golangci-lint), pinned, into .build/bin.
tools:
    scripts/setup-tools.sh

# Build the iris binary into bin/.
build: setup
    go build -tags '{{tags}}' -o bin/iris ./gateway/cmd/iris

# The demo (README command 1): build, serve the demo bundle, ask one image question, profile, stop.
demo scene="82": build plugins demo-bundle
    IRIS_DEMO_SCENE={{scene}} scripts/demo.sh

# Serve the demo bundles (models `demo`, `demo-qwen3`, `demo-phi4` and `random`) in the foreground
# until Ctrl-C, for the README's "Asking a question"; builds them first if they are missing.
serve-demo addr="127.0.0.1:8080": build plugins
    if [[ ! -f .build/bundles/demo/bundle.toml || ! -f .build/bundles/demo-qwen3/bundle.toml || ! -f .build/bundles/demo-phi4/bundle.toml || ! -f .build/bundles/random/bundle.toml ]]; then {{just_executable()}} demo-bundle; fi
    exec bin/iris serve --bundle .build/bundles/demo --bundle .build/bundles/demo-qwen3 --bundle .build/bundles/demo-phi4 --bundle .build/bundles/random --addr {{addr}}

# The demo bundles: `demo`, the trained tiny Qwen2.5-VL (scripts/demo/model, docs/demo-model.md);
# `random`, the seeded random-weight fixture (the OpenAI and AIPerf suites need answers that run
# to max_tokens); `demo-qwen3` and `demo-phi4`, a seeded random-weight Qwen3-VL and
# Phi-4-multimodal (the served goldens').
demo-bundle: build plugins demo-model
    rm -rf .build/bundles/demo .build/bundles/random .build/bundles/demo-qwen3 .build/models/qwen3-seeded .build/bundles/demo-phi4 .build/models/phi4-seeded
    bin/iris bundle build --from .build/models/demo --family qwen2_5_vl --out .build/bundles/demo
    bin/iris bundle build --from core/internal/enginetest/testdata/qwen2_5_vl/tiny-untied --family qwen2_5_vl --out .build/bundles/random
    go run ./core/internal/enginetest/cmd/servedmodel -family qwen3_vl -out .build/models/qwen3-seeded
    bin/iris bundle build --from .build/models/qwen3-seeded --family qwen3_vl --out .build/bundles/demo-qwen3
    go run ./core/internal/enginetest/cmd/servedmodel -family phi4_multimodal -out .build/models/phi4-seeded
    bin/iris bundle build --from .build/models/phi4-seeded --family phi4_multimodal --out .build/bundles/demo-phi4

# The trained demo model's checkpoint into .build/models/demo (scripts/demo/unpack.sh).
demo-model: setup
    scripts/demo/unpack.sh .build/models/demo

# The demo model's accuracy gate (part of `just test`): 300 held-out scenes through iris serve on
# the CPU engine, >= 95% exact match and transformers fp32's answer on every question.
accuracy-gate: build demo-bundle
    scripts/demo/gate.sh

# (the reference stack; about 1 minute) Regenerate the gate's transformers fp32 answers,
# scripts/demo/heldout/reference.jsonl, from the committed model and scenes.
demo-reference: refenv demo-model
    .build/refenv/bin/python scripts/demo/reference.py --model .build/models/demo --scenes scripts/demo/heldout --out scripts/demo/heldout/reference.jsonl

# Every check CI runs (README command 2; scripts/test.sh runs the steps): setup, vet, lint, the
# import and cgo rules, the Go tests of the three modules (the concurrent code with the race
# detector, the model and pixel parity suites without: test-go-race, test-go-models), the cuda
# build vetted and linked against PyPI's CUDA headers, the real AIPerf and the official
# openai-python client end to end, the demo model's accuracy gate, the Kubernetes chart and the
# EPP plugin (deploy/). Each step is timed (scripts/step.sh): the durations and the total close
# the run. What waits on package registries runs in the background beside the CPU-bound steps.
# The GPU tests are linked, not run (no GPU here): vet-cuda lists them, a line near the end says so.
# The Go tests run with -json through scripts/testsum (plain go test's output, failures in full);
# their total, passed/failed/skipped, comes before the durations.
test:
    @scripts/test.sh {{just_executable()}}

# The reference Python stack (torch, transformers) for golden files; CI never needs it.
refenv:
    test -x .build/refenv/bin/python || (python3 -m venv .build/refenv && .build/refenv/bin/pip install -q -r scripts/reference/requirements.txt)

# LocateAnything-3B's remote code needs transformers 4.57.1: .build/laenv holds the pins of
# scripts/reference/requirements-locateanything.txt over the reference stack's torch (a .pth file).
laenv: refenv
    test -x .build/laenv/bin/python || (python3 -m venv .build/laenv && .build/laenv/bin/pip install -q --no-deps -r scripts/reference/requirements-locateanything.txt && realpath .build/refenv/lib/python3.11/site-packages > .build/laenv/lib/python3.11/site-packages/zz_refenv.pth)

# The locateanything plugin's reference cases and pixel goldens from the remote code (NVlabs/Eagle
# 783f656d, fetched into .build/locany; EAGLE_GIT names a local clone to read it from).
golden-locateanything: laenv
    test -f .build/locany/image_processing_locateanything.py || scripts/reference/fetch_locateanything.sh ${EAGLE_GIT:-}
    .build/laenv/bin/python scripts/reference/golden_locateanything.py

# The LocateAnything shape sweep golden (core/internal/enginetest/testdata/sweep/locateanything.json)
# from the remote code's LocateAnythingForConditionalGeneration on seeded tiny checkpoints.
sweep-golden-locateanything: laenv
    test -f .build/locany/modeling_locateanything.py || scripts/reference/fetch_locateanything.sh ${EAGLE_GIT:-}
    .build/laenv/bin/python scripts/reference/make_sweep_locateanything.py

# The LocateAnything served golden (core/internal/enginetest/testdata/locateanything/served.json): a
# sweep model answering the case images through the remote code's processor, and the evaluation
# code's parser on answers spelled out.
golden-served-locateanything: laenv
    test -f .build/locany/eval/inference_grounding_ddp.py || scripts/reference/fetch_locateanything.sh ${EAGLE_GIT:-}
    .build/laenv/bin/python scripts/reference/golden_served_locateanything.py

# The LocateAnything served goldens WITH boxes (core/internal/enginetest/testdata/locateanything/
# grounded_{box,point}.json): the served golden's checkpoint with its weights constructed so that
# greedy decoding spells a labelled box or point (random weights never emit grounding tokens),
# answering 4 case images of different sizes through the remote code; the evaluation code's parser
# gives the boxes in each original image's pixels.
golden-grounded-locateanything: laenv
    test -f .build/locany/eval/inference_grounding_ddp.py || scripts/reference/fetch_locateanything.sh ${EAGLE_GIT:-}
    .build/laenv/bin/python scripts/reference/golden_grounded_locateanything.py

# The demo model's synthetic scenes (scripts/demo/scenes.py, docs/demo-model.md): determinism and
# answers consistent with each scene. Pillow only, with the reference stack's python (CI has no
# Pillow, so `just test` leaves it out).
demo-scenes-test: refenv
    .build/refenv/bin/python -W error::ResourceWarning scripts/demo/test_scenes.py
