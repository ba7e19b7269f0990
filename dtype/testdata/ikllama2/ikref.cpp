// ikref: writes ik_llama.cpp's own quantization and dequantization of
// random rows, for tensorfs's fixtures (see README.md). Reference only: it
// links ik_llama.cpp's ggml-quants.c and iqk/iqk_quantize.cpp, built from
// the commit README.md names.
//
// Usage: ikref SEED ROWS N_PER_ROW OUTDIR [r|r2|r3|r4|r5|bn]
// For each type it writes OUTDIR/NAME.q (the rows as ggml stores them,
// row headers included) and OUTDIR/NAME.f32 (each row's dequantize_row_*).
// With "r" (and "r2", "r3", more sets), the row-interleaved types instead
// (ROWS a multiple of 8): dequantize_row_* of each group of 4 or 8 rows.
// With "r5", MXFP4_R8 and BF16_R16, which have no usable dequantizer of
// their own: the rows (MXFP4 from quantize_mxfp4, or BF16) repacked by
// ik_llama.cpp's own repacking (iqk_repack_tensor's repack_mxfp4,
// repack_bf16_bf16_r16), each row's reference its dequantize_row_mxfp4
// (BF16: the value itself).
// With "bn", IQ1_BN and IQ2_BN: each row's dequantize_row_iq1_bn/_iq2_bn
// of the blocks after the row's scale (the ternary t), times that scale
// read as ik_llama.cpp's matrix multiplication reads it (README.md).

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <immintrin.h>

#include "ggml.h"
#include "ggml-quants.h"
#include "iqk_quantize.h"

// What ggml.c would give; the driver links only the quantization files.
extern "C" {
float ggml_table_f32_f16[1 << 16];
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ggml_abort %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}
}

struct typeinfo { int code; const char * name; int64_t blck, size, meta, group; };
static const typeinfo kTypes[] = {
    {GGML_TYPE_Q6_0,   "Q6_0",   32,  26,  0, 1},
    {GGML_TYPE_IQ1_KT, "IQ1_KT", 256, 56,  4, 1},
    {GGML_TYPE_IQ2_KT, "IQ2_KT", 256, 68,  4, 1},
    {GGML_TYPE_IQ3_KT, "IQ3_KT", 256, 100, 4, 1},
    {GGML_TYPE_IQ4_KT, "IQ4_KT", 256, 128, 4, 1},
};
static const typeinfo kRTypes[] = {
    {GGML_TYPE_Q4_0_R8,   "Q4_0_R8",   32,  18,  0, 8},
    {GGML_TYPE_Q8_0_R8,   "Q8_0_R8",   32,  34,  0, 8},
    {GGML_TYPE_IQ4_XS_R8, "IQ4_XS_R8", 256, 136, 0, 8},
    {GGML_TYPE_Q4_K_R4,   "Q4_K_R4",   256, 144, 0, 4},
    {GGML_TYPE_Q6_K_R4,   "Q6_K_R4",   256, 210, 0, 4},
    {GGML_TYPE_IQ4_K_R4,  "IQ4_K_R4",  256, 144, 0, 4},
    {GGML_TYPE_IQ2_K_R4,  "IQ2_K_R4",  256, 76,  0, 4},
    {GGML_TYPE_IQ3_K_R4,  "IQ3_K_R4",  256, 110, 0, 4},
};
static const typeinfo kR2Types[] = {
    {GGML_TYPE_IQ4_KS_R4, "IQ4_KS_R4", 256, 136, 4, 4},
    {GGML_TYPE_IQ5_KS_R4, "IQ5_KS_R4", 256, 168, 4, 4},
    {GGML_TYPE_IQ5_K_R4,  "IQ5_K_R4",  256, 176, 0, 4},
    {GGML_TYPE_Q5_K_R4,   "Q5_K_R4",   256, 176, 0, 4},
    {GGML_TYPE_Q3_K_R4,   "Q3_K_R4",   256, 110, 0, 4},
    {GGML_TYPE_Q2_K_R4,   "Q2_K_R4",   256, 84,  0, 4},
    {GGML_TYPE_IQ4_NL_R4, "IQ4_NL_R4", 32,  18,  0, 4},
    {GGML_TYPE_Q5_0_R4,   "Q5_0_R4",   32,  22,  0, 4},
    {GGML_TYPE_Q6_0_R4,   "Q6_0_R4",   32,  26,  0, 4},
    {GGML_TYPE_IQ2_BN_R4, "IQ2_BN_R4", 64,  16,  4, 4},
};
static const typeinfo kR3Types[] = {
    {GGML_TYPE_IQ1_S_R4, "IQ1_S_R4", 32, 6, 2, 4},
    {GGML_TYPE_IQ1_M_R4, "IQ1_M_R4", 32, 7, 2, 4},
    {GGML_TYPE_IQ2_XXS_R4, "IQ2_XXS_R4", 256, 66, 0, 4},
    {GGML_TYPE_IQ3_XXS_R4, "IQ3_XXS_R4", 256, 98, 0, 4},
    {GGML_TYPE_IQ2_XS_R4, "IQ2_XS_R4", 256, 74, 0, 4},
    {GGML_TYPE_IQ2_S_R4, "IQ2_S_R4", 256, 82, 0, 4},
    {GGML_TYPE_IQ3_S_R4, "IQ3_S_R4", 256, 110, 0, 4},
};
static const typeinfo kR4Types[] = {
    {GGML_TYPE_Q8_K_R8,  "Q8_K_R8",  256, 258, 0, 8},
    {GGML_TYPE_Q8_KV_R8, "Q8_KV_R8", 32,  32,  4, 8},
};
static const typeinfo kR5Types[] = {
    {GGML_TYPE_MXFP4_R8, "MXFP4_R8", 32, 17, 0, 8},
    {GGML_TYPE_BF16_R16, "BF16_R16", 1,  2,  0, 16},
};
static const typeinfo kBNTypes[] = {
    {GGML_TYPE_IQ1_BN, "IQ1_BN", 64, 13, 2, 1},
    {GGML_TYPE_IQ2_BN, "IQ2_BN", 64, 16, 4, 1},
};
// The base types the repacking quantizers call.
static const typeinfo kBase[] = {
    {GGML_TYPE_Q4_0, "Q4_0", 32, 18, 0, 1}, {GGML_TYPE_Q8_0, "Q8_0", 32, 34, 0, 1},
    {GGML_TYPE_IQ4_XS, "IQ4_XS", 256, 136, 0, 1}, {GGML_TYPE_Q4_K, "Q4_K", 256, 144, 0, 1},
    {GGML_TYPE_Q6_K, "Q6_K", 256, 210, 0, 1}, {GGML_TYPE_IQ4_NL, "IQ4_NL", 32, 18, 0, 1},
    {GGML_TYPE_IQ4_K, "IQ4_K", 256, 144, 0, 1}, {GGML_TYPE_IQ2_K, "IQ2_K", 256, 76, 0, 1},
    {GGML_TYPE_IQ3_K, "IQ3_K", 256, 110, 0, 1},
    {GGML_TYPE_IQ4_KS, "IQ4_KS", 256, 136, 4, 1}, {GGML_TYPE_IQ5_KS, "IQ5_KS", 256, 168, 4, 1},
    {GGML_TYPE_IQ5_K, "IQ5_K", 256, 176, 0, 1}, {GGML_TYPE_Q5_K, "Q5_K", 256, 176, 0, 1},
    {GGML_TYPE_Q3_K, "Q3_K", 256, 110, 0, 1}, {GGML_TYPE_Q2_K, "Q2_K", 256, 84, 0, 1},
    {GGML_TYPE_Q5_0, "Q5_0", 32, 22, 0, 1},
    {GGML_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, 0, 1}, {GGML_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, 0, 1},
    {GGML_TYPE_IQ2_XS, "IQ2_XS", 256, 74, 0, 1}, {GGML_TYPE_IQ2_S, "IQ2_S", 256, 82, 0, 1},
    {GGML_TYPE_IQ3_S, "IQ3_S", 256, 110, 0, 1},
    {GGML_TYPE_Q8_K, "Q8_K", 256, 296, 0, 1}, {GGML_TYPE_Q8_KV, "Q8_KV", 32, 32, 8, 1},
    {GGML_TYPE_MXFP4, "MXFP4", 32, 17, 0, 1},
};

static const typeinfo * find(int code) {
    for (auto & t : kTypes) if (t.code == code) return &t;
    for (auto & t : kRTypes) if (t.code == code) return &t;
    for (auto & t : kR2Types) if (t.code == code) return &t;
    for (auto & t : kR3Types) if (t.code == code) return &t;
    for (auto & t : kR4Types) if (t.code == code) return &t;
    for (auto & t : kR5Types) if (t.code == code) return &t;
    for (auto & t : kBNTypes) if (t.code == code) return &t;
    for (auto & t : kBase) if (t.code == code) return &t;
    fprintf(stderr, "ikref: type %d not in the driver's table\n", code);
    abort();
}

size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    auto t = find(type);
    return t->meta + t->size*ne/t->blck;
}
size_t ggml_type_size(enum ggml_type type) { return find(type)->size; }
float ggml_bf16_to_fp32(ggml_bf16_t) { abort(); }
// For iqk_repack_tensor ("r5"): the driver's tensors are contiguous.
bool ggml_is_contiguous(const struct ggml_tensor *) { return true; }
int64_t ggml_nrows(const struct ggml_tensor * t) { return t->ne[1]*t->ne[2]*t->ne[3]; }

static uint64_t rng_state;
static uint64_t next_u64() { // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double uniform() { return ((next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static float gauss() { return (float)(std::sqrt(-2*std::log(uniform())) * std::cos(6.283185307179586*uniform())); }

static void write_file(const std::string & path, const void * data, size_t n) {
    FILE * f = fopen(path.c_str(), "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) { perror(path.c_str()); exit(1); }
}

int main(int argc, char ** argv) {
    std::string mode = argc == 6 ? argv[5] : "";
    if (argc != 5 && !(argc == 6 && (mode == "r" || mode == "r2" || mode == "r3" || mode == "r4" || mode == "r5" || mode == "bn"))) { fprintf(stderr, "usage: ikref SEED ROWS N_PER_ROW OUTDIR [r|r2|r3|r4|r5|bn]\n"); return 2; }
    auto list = [](auto & a) { return std::vector<typeinfo>(std::begin(a), std::end(a)); };
    std::vector<typeinfo> types = mode == "r" ? list(kRTypes) : mode == "r2" ? list(kR2Types) : mode == "r3" ? list(kR3Types) : mode == "r4" ? list(kR4Types) : mode == "r5" ? list(kR5Types) : mode == "bn" ? list(kBNTypes) : list(kTypes);
    for (int i = 0; i < (1 << 16); ++i) ggml_table_f32_f16[i] = _cvtsh_ss((unsigned short)i);
    uint64_t seed = strtoull(argv[1], nullptr, 10);
    int64_t rows = atoll(argv[2]), n = atoll(argv[3]);
    std::string out = argv[4];
    if (mode == "r3") { // the grids' search tables
        iq2xs_init_impl(GGML_TYPE_IQ1_S);
        iq2xs_init_impl(GGML_TYPE_IQ2_XXS);
        iq2xs_init_impl(GGML_TYPE_IQ2_XS);
        iq2xs_init_impl(GGML_TYPE_IQ2_S);
        iq3xs_init_impl(256);
        iq3xs_init_impl(512);
    }
    // IQ2_XXS's and IQ2_XS's quantizers need importance weights: all ones
    // (given to every grid type of "r3").
    std::vector<float> ones(n, 1.f);
    for (auto & t : types) {
        rng_state = seed * 1000003 + t.code;
        // Rows of different scales: 1, 1e-3 with outliers, 1e3, and one
        // whose second 256 elements are zero (the rest cycle).
        std::vector<float> x(rows*n);
        for (int64_t r = 0; r < rows; ++r) {
            float s = r % 4 == 0 ? 1.f : r % 4 == 1 ? 1e-3f : r % 4 == 2 ? 1e3f : 0.05f;
            for (int64_t j = 0; j < n; ++j) {
                float v = s*gauss();
                if (r % 4 == 1 && uniform() < 0.01) v *= 30;
                if (r % 4 == 3 && j >= 256 && j < 512) v = 0;
                x[r*n + j] = v;
            }
        }
        size_t rs = ggml_row_size((ggml_type)t.code, n);
        std::vector<uint8_t> q(rows*rs + 64);
        std::vector<float> y(rows*n);
        size_t got = 0;
        switch (t.code) {
            case GGML_TYPE_Q6_0:   got = quantize_q6_0  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ1_KT: got = quantize_iq1_kt(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ2_KT: got = quantize_iq2_kt(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ3_KT: got = quantize_iq3_kt(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ4_KT: got = quantize_iq4_kt(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q4_0_R8:   got = quantize_q4_0_r8  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q8_0_R8:   got = quantize_q8_0_r8  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ4_XS_R8: got = quantize_iq4_xs_r8(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q4_K_R4:   got = quantize_q4_k_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q6_K_R4:   got = quantize_q6_k_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ4_K_R4:  got = quantize_iq4_k_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ2_K_R4:  got = quantize_iq2_k_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ3_K_R4:  got = quantize_iq3_k_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ4_KS_R4: got = quantize_iq4_ks_r4(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ5_KS_R4: got = quantize_iq5_ks_r4(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ5_K_R4:  got = quantize_iq5_k_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q5_K_R4:   got = quantize_q5_k_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q3_K_R4:   got = quantize_q3_k_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q2_K_R4:   got = quantize_q2_k_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ4_NL_R4: got = quantize_iq4_nl_r4(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q5_0_R4:   got = quantize_q5_0_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q6_0_R4:   got = quantize_q6_0_r4  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ2_BN_R4: got = quantize_iq2_bn_r4(x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ1_S_R4:  got = quantize_iq1_s_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ1_M_R4:  got = quantize_iq1_m_r4 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ2_XXS_R4: got = quantize_iq2_xxs_r4(x.data(), q.data(), rows, n, ones.data(), nullptr); break;
            case GGML_TYPE_IQ3_XXS_R4: got = quantize_iq3_xxs_r4(x.data(), q.data(), rows, n, ones.data(), nullptr); break;
            case GGML_TYPE_IQ2_XS_R4: got = quantize_iq2_xs_r4(x.data(), q.data(), rows, n, ones.data(), nullptr); break;
            case GGML_TYPE_IQ2_S_R4:  got = quantize_iq2_s_r4 (x.data(), q.data(), rows, n, ones.data(), nullptr); break;
            case GGML_TYPE_IQ3_S_R4:  got = quantize_iq3_s_r4 (x.data(), q.data(), rows, n, ones.data(), nullptr); break;
            case GGML_TYPE_Q8_K_R8:   got = quantize_q8_k_r8  (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_Q8_KV_R8:  got = quantize_q8_KV_r8 (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_MXFP4_R8: { // MXFP4 rows, their reference, then ik's repack
                got = quantize_mxfp4(x.data(), q.data(), rows, n, nullptr, nullptr);
                for (int64_t r = 0; r < rows; ++r) dequantize_row_mxfp4((const block_mxfp4 *)(q.data() + r*rs), y.data() + r*n, n);
                struct ggml_tensor tt;
                memset(&tt, 0, sizeof(tt));
                tt.type = GGML_TYPE_MXFP4;
                tt.ne[0] = n; tt.ne[1] = rows; tt.ne[2] = 1; tt.ne[3] = 1;
                tt.data = q.data();
                strcpy(tt.name, "blk.0.ffn_down.weight");
                iqk_repack_tensor(&tt);
                if (tt.type != GGML_TYPE_MXFP4_R8) { fprintf(stderr, "MXFP4_R8: not repacked\n"); return 1; }
                break;
            }
            case GGML_TYPE_BF16_R16: { // BF16 rows (f32 bits cut), then ik's repack
                std::vector<uint16_t> b(rows*n);
                for (int64_t j = 0; j < rows*n; ++j) {
                    uint32_t u; memcpy(&u, &x[j], 4);
                    b[j] = (uint16_t)(u >> 16);
                    u = (uint32_t)b[j] << 16; memcpy(&y[j], &u, 4);
                }
                repack_bf16_bf16_r16(b.data(), q.data(), rows, n);
                got = rows*rs;
                break;
            }
            case GGML_TYPE_IQ1_BN:    got = quantize_iq1_bn   (x.data(), q.data(), rows, n, nullptr, nullptr); break;
            case GGML_TYPE_IQ2_BN:    got = quantize_iq2_bn   (x.data(), q.data(), rows, n, nullptr, nullptr); break;
        }
        if (got != rows*rs) { fprintf(stderr, "%s: quantize gave %zu bytes, want %zu\n", t.name, got, rows*rs); return 1; }
        for (int64_t r = 0; r < rows && mode != "r5"; r += t.group) { // r5: y is already the rows' reference
            const void * row = q.data() + r*rs;
            float * yr = y.data() + r*n;
            int64_t k = t.group*n;
            switch (t.code) {
                case GGML_TYPE_Q4_0_R8:   dequantize_row_q4_0_r8  ((const block_iq4_nl_r8 *)row, yr, k); break;
                case GGML_TYPE_Q8_0_R8:   dequantize_row_q8_0_r8  ((const block_q8_0_r8   *)row, yr, k); break;
                case GGML_TYPE_IQ4_XS_R8: dequantize_row_iq4_xs_r8((const block_iq4_xs_r8 *)row, yr, k); break;
                case GGML_TYPE_Q4_K_R4:   dequantize_row_q4_k_r4  ((const block_q4_k_r4   *)row, yr, k); break;
                case GGML_TYPE_Q6_K_R4:   dequantize_row_q6_k_r4  ((const block_q6_k_r4   *)row, yr, k); break;
                case GGML_TYPE_IQ4_K_R4:  dequantize_row_iq4_k_r4 ((const block_iq4_k_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ2_K_R4:  dequantize_row_iq2_k_r4 ((const block_iq2_k_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ3_K_R4:  dequantize_row_iq3_k_r4 ((const block_iq3_k_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ4_KS_R4: dequantize_row_iq4_ks_r4((const block_iq4_ks_r4 *)row, yr, k); break;
                case GGML_TYPE_IQ5_KS_R4: dequantize_row_iq5_ks_r4((const block_iq5_ks_r4 *)row, yr, k); break;
                case GGML_TYPE_IQ5_K_R4:  dequantize_row_iq5_k_r4 ((const block_iq5_k_r4  *)row, yr, k); break;
                case GGML_TYPE_Q5_K_R4:   dequantize_row_q5_k_r4  ((const block_q5_k_r4   *)row, yr, k); break;
                case GGML_TYPE_Q3_K_R4:   dequantize_row_q3_k_r4  ((const block_q3_k_r4   *)row, yr, k); break;
                case GGML_TYPE_Q2_K_R4:   dequantize_row_q2_k_r4  ((const block_q2_k_r4   *)row, yr, k); break;
                case GGML_TYPE_IQ4_NL_R4: dequantize_row_iq4_nl_r4((const block_iq4_nl_r4 *)row, yr, k); break;
                case GGML_TYPE_Q5_0_R4:   dequantize_row_q5_0_r4  ((const block_q5_0_r4   *)row, yr, k); break;
                case GGML_TYPE_Q6_0_R4:   dequantize_row_q6_0_r4  ((const block_q6_0_r4   *)row, yr, k); break;
                case GGML_TYPE_IQ1_S_R4:  dequantize_row_iq1_s_r4 ((const block_iq1_s_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ1_M_R4:  dequantize_row_iq1_m_r4 ((const block_iq1_m_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ2_XXS_R4: dequantize_row_iq2_xxs_r4((const block_iq2_xxs_r4 *)row, yr, k); break;
                case GGML_TYPE_IQ3_XXS_R4: dequantize_row_iq3_xxs_r4((const block_iq3_xxs_r4 *)row, yr, k); break;
                case GGML_TYPE_IQ2_XS_R4: dequantize_row_iq2_xs_r4((const block_iq2_xs_r4 *)row, yr, k); break;
                case GGML_TYPE_IQ2_S_R4:  dequantize_row_iq2_s_r4 ((const block_iq2_s_r4  *)row, yr, k); break;
                case GGML_TYPE_IQ3_S_R4:  dequantize_row_iq3_s_r4 ((const block_iq3_s_r4  *)row, yr, k); break;
                case GGML_TYPE_Q8_K_R8:   dequantize_row_q8_k_r8  ((const block_q8_k_r8   *)row, yr, k); break;
                case GGML_TYPE_Q8_KV_R8:  dequantize_row_q8_KV_r8 (row, yr, k); break;
                case GGML_TYPE_IQ2_BN_R4: dequantize_row_iq2_bn_r4((const block_iq2_bn    *)row, yr, k); break;
                case GGML_TYPE_IQ1_BN: case GGML_TYPE_IQ2_BN: {
                    // t from the blocks after the row's scale, then scale·t,
                    // the scale read as iqk_gemm_1bit.cpp's mul_mat_iq1bn_q8_K64
                    // (fp16) and DequantizeIQ2BN::new_row (float32) read it.
                    const uint8_t * blocks = (const uint8_t *)row + t.meta;
                    float scale;
                    if (t.code == GGML_TYPE_IQ1_BN) {
                        dequantize_row_iq1_bn((const block_iq1_bn *)blocks, yr, n);
                        uint16_t h; memcpy(&h, row, 2);
                        scale = ggml_table_f32_f16[h];
                    } else {
                        dequantize_row_iq2_bn((const block_iq2_bn *)blocks, yr, n);
                        memcpy(&scale, row, 4);
                    }
                    for (int64_t j = 0; j < n; ++j) yr[j] = scale*yr[j];
                    break;
                }
                case GGML_TYPE_Q6_0:   dequantize_row_q6_0  ((const block_q6_0   *)row, yr, n); break;
                case GGML_TYPE_IQ1_KT: dequantize_row_iq1_kt((const block_iq1_kt *)row, yr, n); break;
                case GGML_TYPE_IQ2_KT: dequantize_row_iq2_kt((const block_iq2_kt *)row, yr, n); break;
                case GGML_TYPE_IQ3_KT: dequantize_row_iq3_kt((const block_iq3_kt *)row, yr, n); break;
                case GGML_TYPE_IQ4_KT: dequantize_row_iq4_kt((const block_iq4_kt *)row, yr, n); break;
            }
        }
        write_file(out + "/" + t.name + ".q", q.data(), rows*rs);
        write_file(out + "/" + t.name + ".f32", y.data(), y.size()*sizeof(float));
        fprintf(stderr, "%s: %lld rows of %lld, %zu bytes\n", t.name, (long long)rows, (long long)n, rows*rs);
    }
    return 0;
}
