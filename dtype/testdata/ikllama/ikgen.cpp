// ikgen: writes a GGUF file of ik_llama.cpp quantized tensors and the
// float32s ik_llama.cpp's own dequantize_row_* gives for them (.f32ref).
// Reference tool for tensorfs's tests: it is linked against ik_llama.cpp's
// ggml/src/iqk/iqk_quantize.cpp (see gen.sh); no code of it is in tensorfs.
//
//   ikgen OUT.gguf SEED
//
// Tensors, in file order: for each type, "<type>.a" of 3 rows of 512
// elements and "<type>.b" of 2 rows of 2304 elements, from a seeded
// xorshift generator: gaussian-like values whose scale differs per row
// (1e-3 .. 1e3), with the second row of .a zero in its first 256 elements.
// OUT.gguf.f32ref holds every tensor's elements, dequantized, in file
// order, little-endian float32.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cstdarg>
#include <string>
#include <vector>
#include <immintrin.h>

extern "C" {
struct quantize_user_data;
typedef size_t (*qfn)(const float *, void *, int64_t, int64_t, const float *, const quantize_user_data *);
typedef void (*dfn)(const void *, float *, int64_t);
#define IK(T) \
    size_t quantize_##T(const float *, void *, int64_t, int64_t, const float *, const quantize_user_data *); \
    void dequantize_row_##T(const void *, float *, int64_t);
IK(iq2_k) IK(iq3_k) IK(iq4_k) IK(iq5_k) IK(iq6_k)
IK(iq4_ks) IK(iq2_ks) IK(iq4_kss) IK(iq5_ks) IK(iq3_ks) IK(iq2_kl)

// What iqk_quantize.cpp needs from the rest of ggml for these types.
float ggml_table_f32_f16[1 << 16];
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort %s:%d: ", file, line);
    va_list ap; va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap);
    fputc('\n', stderr);
    abort();
}
}

struct ikType {
    const char * name;
    uint32_t code;      // ggml type code in ik_llama.cpp's ggml.h
    int64_t blockBytes; // per 256 elements
    int64_t rowMeta;    // bytes before each row's blocks
    qfn q;
    dfn d;
};

#define T(N, C, B, M) {#N, C, B, M, quantize_##N, dequantize_row_##N}
static const ikType types[] = {
    T(iq2_k, 137, 76, 0), T(iq3_k, 138, 110, 0), T(iq4_k, 139, 144, 0),
    T(iq5_k, 140, 176, 0), T(iq6_k, 141, 212, 0),
    T(iq4_ks, 144, 136, 4), T(iq2_ks, 145, 70, 2), T(iq4_kss, 146, 128, 4),
    T(iq5_ks, 152, 168, 4), T(iq3_ks, 156, 102, 2), T(iq2_kl, 157, 86, 2),
};

static const ikType * byCode(int code) {
    for (const ikType & t : types)
        if ((int)t.code == code) return &t;
    fprintf(stderr, "ikgen: ggml type %d asked for\n", code);
    abort();
}

// ggml.c's row and block sizes, for the types here.
extern "C" size_t ggml_type_size(int type) { return byCode(type)->blockBytes; }
extern "C" size_t ggml_row_size(int type, int64_t ne) {
    const ikType * t = byCode(type);
    return t->rowMeta + ne / 256 * t->blockBytes;
}

static uint64_t rng;
static double uniform() {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float gauss() {
    double s = 0;
    for (int i = 0; i < 12; i++) s += uniform();
    return (float)(s - 6);
}

static void put(std::string & b, const void * p, size_t n) { b.append((const char *)p, n); }
static void putU32(std::string & b, uint32_t v) { put(b, &v, 4); }
static void putU64(std::string & b, uint64_t v) { put(b, &v, 8); }
static void putStr(std::string & b, const std::string & s) { putU64(b, s.size()); b += s; }

int main(int argc, char ** argv) {
    if (argc != 3) { fprintf(stderr, "usage: ikgen OUT.gguf SEED\n"); return 2; }
    for (int i = 0; i < 1 << 16; i++) ggml_table_f32_f16[i] = _cvtsh_ss((uint16_t)i);
    rng = 0x9E3779B97F4A7C15ull ^ strtoull(argv[2], 0, 10);
    struct shape { const char * suffix; int64_t rows, cols; };
    const shape shapes[] = {{"a", 3, 512}, {"b", 2, 2304}};
    std::string info, data, ref;
    int ntensors = 0;
    for (const ikType & t : types) {
        for (const shape & s : shapes) {
            std::vector<float> x(s.rows * s.cols);
            for (int64_t r = 0; r < s.rows; r++) {
                float scale = powf(10.f, (float)(3 * r) - 3 + (float)uniform());
                for (int64_t j = 0; j < s.cols; j++) x[r * s.cols + j] = scale * gauss();
            }
            if (s.rows == 3) memset(&x[s.cols], 0, 256 * sizeof(float));
            int64_t rowBytes = t.rowMeta + s.cols / 256 * t.blockBytes;
            std::vector<uint8_t> q(s.rows * rowBytes + 64);
            size_t n = t.q(x.data(), q.data(), s.rows, s.cols, nullptr, nullptr);
            if ((int64_t)n != s.rows * rowBytes) {
                fprintf(stderr, "%s: quantize gave %zu bytes, want %lld\n", t.name, n, (long long)(s.rows * rowBytes));
                return 1;
            }
            std::vector<float> y(s.cols);
            for (int64_t r = 0; r < s.rows; r++) {
                t.d(q.data() + r * rowBytes, y.data(), s.cols);
                put(ref, y.data(), y.size() * 4);
            }
            while (data.size() % 32) data += '\0';
            putStr(info, std::string(t.name) + "." + s.suffix);
            putU32(info, 2);
            putU64(info, s.cols);
            putU64(info, s.rows);
            putU32(info, t.code);
            putU64(info, data.size());
            put(data, q.data(), n);
            ntensors++;
        }
    }
    std::string out = "GGUF";
    putU32(out, 3);
    putU64(out, ntensors);
    putU64(out, 1);
    putStr(out, "general.name");
    putU32(out, 8); // string
    putStr(out, "ik_llama.cpp types");
    out += info;
    while (out.size() % 32) out += '\0';
    out += data;
    std::string refName = std::string(argv[1]) + ".f32ref";
    FILE * f = fopen(argv[1], "wb");
    FILE * g = fopen(refName.c_str(), "wb");
    if (!f || !g || fwrite(out.data(), 1, out.size(), f) != out.size() || fwrite(ref.data(), 1, ref.size(), g) != ref.size() ||
        fclose(f) || fclose(g)) {
        fprintf(stderr, "ikgen: cannot write %s\n", argv[1]);
        return 1;
    }

    // IQ6_K evaluates a cubic per 6-bit code; say whether a build that
    // fuses its multiply-adds (-march=native with FMA) gives other values.
    int differ = 0;
    for (int q = 0; q < 64; q++) {
        float v = (float)q;
        volatile float a = 6.2568f + v * (-0.11218f + v * 0.0011972f);
        float plain = -127.f + v * a;
        float fused = fmaf(v, fmaf(v, fmaf(v, 0.0011972f, -0.11218f), 6.2568f), -127.f);
        if (plain != fused) differ++;
    }
    fprintf(stderr, "ikgen: %s: %d tensors; iq6_k: %d of 64 codes differ when fused\n", argv[1], ntensors, differ);
    return 0;
}
