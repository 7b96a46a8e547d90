// llama-bench's two standard tests, pp512 and tg128, on the llama.cpp that
// llama-cpp-sys-2 vendors and has already built (its static libraries, same
// CPU flags, same compiler options): the crate leaves out tools/llama-bench's
// source, so bench/local_vs_llama_bench.sh builds this instead.
//
//   pp512:      one llama_decode of 512 random tokens (as llama-bench does)
//   tg128:      128 single-token decodes from an empty cache
//   tg128@d512: the same after a 512-token prompt (what a chat does)
//   tg128x4:    128 steps of one llama_decode of 4 tokens, one in each of
//               4 sequences (llama.cpp's ceiling for 4 chats at once)
//
// Each test runs REPS times after a warm-up; prints the mean tokens/s.
//   llama_mini_bench MODEL.gguf THREADS [REPS] [N_CTX]
#include "llama.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Bench {
    llama_context * ctx;
    int n_vocab;
    std::mt19937 rng{42};

    llama_token random_token() { return (llama_token) (rng() % (unsigned) n_vocab); }

    bool prompt(int n) {
        std::vector<llama_token> tokens(n);
        for (auto & t : tokens) t = random_token();
        if (llama_decode(ctx, llama_batch_get_one(tokens.data(), n)) != 0) return false;
        llama_synchronize(ctx);
        return true;
    }

    bool generate(int n) {
        llama_token t = random_token();
        for (int i = 0; i < n; i++) {
            if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) return false;
            llama_synchronize(ctx);
            t = random_token();
        }
        return true;
    }

    // n_gen steps, each one decode of one token in each of n_seq sequences.
    bool generate_parallel(int n_gen, int n_seq) {
        llama_batch batch = llama_batch_init(n_seq, 0, 1);
        for (int i = 0; i < n_gen; i++) {
            batch.n_tokens = n_seq;
            for (int s = 0; s < n_seq; s++) {
                batch.token[s] = random_token();
                batch.pos[s] = i;
                batch.n_seq_id[s] = 1;
                batch.seq_id[s][0] = s;
                batch.logits[s] = 1;
            }
            if (llama_decode(ctx, batch) != 0) return false;
            llama_synchronize(ctx);
        }
        llama_batch_free(batch);
        return true;
    }

    void clear() { llama_memory_clear(llama_get_memory(ctx), true); }
};

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf THREADS [REPS] [N_CTX]\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[2]);
    const int reps = argc > 3 ? atoi(argv[3]) : 3;
    const int n_ctx = argc > 4 ? atoi(argv[4]) : 8192;
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.n_seq_max = 4;
    cp.kv_unified = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    Bench b{ctx, llama_vocab_n_tokens(llama_model_get_vocab(model))};
    // Warm-up, as llama-bench does.
    b.clear();
    b.prompt(32);
    b.generate(1);
    double pp = 0, tg = 0, tgd = 0, tgp = 0;
    for (int r = 0; r < reps; r++) {
        b.clear();
        double t0 = now_s();
        if (!b.prompt(512)) return 1;
        pp += 512 / (now_s() - t0);
        b.clear();
        t0 = now_s();
        if (!b.generate(128)) return 1;
        tg += 128 / (now_s() - t0);
        b.clear();
        b.prompt(512);
        t0 = now_s();
        if (!b.generate(128)) return 1;
        tgd += 128 / (now_s() - t0);
        b.clear();
        t0 = now_s();
        if (!b.generate_parallel(128, 4)) return 1;
        tgp += 4 * 128 / (now_s() - t0);
    }
    printf("llama.cpp pp512: %.1f tok/s\n", pp / reps);
    printf("llama.cpp tg128: %.1f tok/s\n", tg / reps);
    printf("llama.cpp tg128@d512: %.1f tok/s\n", tgd / reps);
    printf("llama.cpp tg128x4: %.1f tok/s all together\n", tgp / reps);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
