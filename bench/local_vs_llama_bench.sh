#!/usr/bin/env bash
# Compares the local engine's prompt-reading and generation speed with
# llama.cpp's own llama-bench on the same GGUF, threads and CPU flags.
# llama-bench is built with the CPU flags .cargo/config.toml sets, once, into
# target/llama-bench, from LLAMA_CPP_SRC: a llama.cpp checkout at the commit
# llama-cpp-sys-2 vendors (the vendored copy leaves out tools/llama-bench's
# source, so it cannot be built from there).
#   LLAMA_CPP_SRC=~/llama.cpp bench/local_vs_llama_bench.sh MODEL.gguf [THREADS]
# Prints both figures and our share of llama-bench's; run it on an idle
# machine (the ratio is what matters: both run back to back).
set -euo pipefail
model="${1:?usage: bench/local_vs_llama_bench.sh MODEL.gguf [THREADS]}"
threads="${2:-1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
src="${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to a llama.cpp checkout (see the top of this script)}"
out="$root/target/llama-bench"
if [ ! -x "$out/bin/llama-bench" ]; then
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_OPENMP=ON >/dev/null
  cmake --build "$out" --target llama-bench -j "$(nproc)" >/dev/null
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -r 3 -o csv 2>/dev/null |
  awk -F, 'NR>1 {gsub(/"/,""); print "llama-bench " ($0 ~ /,512,0,/ ? "pp512" : "tg128") ": " $(NF-1) " tok/s"}'
# PROFILE=dev measures a debug build (llama.cpp is optimised in every
# profile, but the sampling loop is not): quicker to build, a lower bound.
profile="${PROFILE:-release}"
cargo build --profile "$profile" --quiet --manifest-path "$root/Cargo.toml" -p ferroclaw-local --example probe
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
log=$(FERROCLAW_LOCAL_THREADS="$threads" PROBE_PAD=500 PROBE_QUIET=1 \
  "$root/target/$dir/examples/probe" "$model" "Write a long story about a ship." 2>/dev/null | grep "^prompt")
echo "ferroclaw: $log"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
