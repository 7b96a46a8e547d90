#!/usr/bin/env bash
# Compares the local engine's prompt-reading and generation speed with
# llama.cpp's own, on the same GGUF, threads and build. llama.cpp's figures
# come from bench/llama_mini_bench.cpp (llama-bench's pp512 and tg128, plus
# tg128 after a 512-token prompt), compiled against the headers and static
# libraries llama-cpp-sys-2 already built in target/*/build (same vendored
# llama.cpp, same CPU flags from .cargo/config.toml, same -O3), so it runs
# offline; the vendored copy leaves out tools/llama-bench's source. Ours come
# from the probe example: a ~512-token prompt read, then up to 200 tokens
# generated (so generation is compared with tg128@d512).
#   bench/local_vs_llama_bench.sh MODEL.gguf [THREADS] [ROUNDS]
# Runs ROUNDS (default 3) alternating rounds of both, so a busy machine
# slows both alike, and prints each figure, the means and our share of
# llama.cpp's (target: 90% or more). PROFILE=dev uses the debug build of the
# probe (llama.cpp is optimised in every profile, our sampling loop is not).
set -euo pipefail
model="${1:?usage: bench/local_vs_llama_bench.sh MODEL.gguf [THREADS] [ROUNDS]}"
threads="${2:-1}"
rounds="${3:-3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${PROFILE:-release}"
cargo build --profile "$profile" --quiet --manifest-path "$root/Cargo.toml" -p ferroclaw-local --example probe
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
out=$(ls -td "$root"/target/"$dir"/build/llama-cpp-sys-2-*/out 2>/dev/null | head -1)
[ -f "$out/lib/libllama.a" ] || { echo "no llama.cpp build under target/$dir/build" >&2; exit 1; }
bench="$root/target/$dir/llama_mini_bench"
if [ ! -x "$bench" ] || [ "$root/bench/llama_mini_bench.cpp" -nt "$bench" ] || [ "$out/lib/libllama.a" -nt "$bench" ]; then
  ${CXX:-c++} -O2 -std=c++17 -I"$out/include" "$root/bench/llama_mini_bench.cpp" -o "$bench" \
    "$out/lib/libllama.a" "$out/lib/libggml.a" "$out/lib/libggml-cpu.a" "$out/lib/libggml-base.a" \
    -fopenmp -lpthread -ldl
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  "$bench" "$model" "$threads" 1 | tee -a "$log"
  line=$(FERROCLAW_LOCAL_THREADS="$threads" PROBE_PAD=500 PROBE_QUIET=1 \
    "$root/target/$dir/examples/probe" "$model" "Write a long story about a ship." 2>/dev/null | grep "^prompt")
  echo "ferroclaw: $line" | tee -a "$log"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
awk '
  /^llama.cpp pp512:/ { pp += $3; npp++ }
  /^llama.cpp tg128@d512:/ { tg += $3; ntg++ }
  /^ferroclaw:/ { for (i = 1; i <= NF; i++) { if ($i == "read);") { gsub(/\(/, "", $(i-2)); rd += $(i-2); nrd++ } if ($i == "tok/s" && $(i-2) == "at") { gen += $(i-1); ngen++ } } }
  END {
    printf "mean: llama.cpp pp512 %.1f, tg128@d512 %.1f tok/s; ferroclaw read %.1f, generate %.1f tok/s\n", pp/npp, tg/ntg, rd/nrd, gen/ngen
    printf "ferroclaw / llama.cpp: prompt %.0f%%, generation %.0f%%\n", 100*(rd/nrd)/(pp/npp), 100*(gen/ngen)/(tg/ntg)
  }' "$log"
