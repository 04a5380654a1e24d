/* kvq port plug-in ABI: a quantize kernel under test, compiled into a shared library, loaded by
 * `kvq check --plugin LIB.so` (docs/ports.md). Plain C; the library exports these symbols with
 * extern "C" linkage. Layout, scales and rounding are those of the kvq recipe the plug-in names
 * (docs/recipes.md "Kernel contract"):
 *   x       [rows, cols] row-major values (dtype below); cols a multiple of the block
 *   codes   4-bit elements packed two a byte (element 2i in the low nibble), cols/2 bytes a row;
 *           8-bit elements one a byte, cols bytes a row
 *   scales  one byte (E4M3 or E8M0 code) per block, cols/block a row; none for per-tensor recipes
 *   global_scale  the FP32 tensor DECODE scale g = amax / divisor of the recipe (1 where none)
 * Pointers are host or device memory as kvq_port_memory() says; on the device, `stream` is a
 * cudaStream_t (kvq passes the default stream and synchronises after each call).
 * Every entry point returns 0 on success, anything else on error (kvq_port_last_error() says why). */
#ifndef KVQ_PORT_H
#define KVQ_PORT_H

#include <stdint.h>

#define KVQ_PORT_ABI_VERSION 1

enum kvq_port_memory_kind { KVQ_PORT_HOST = 0, KVQ_PORT_DEVICE = 1 };
enum kvq_port_dtype { KVQ_PORT_FP32 = 0, KVQ_PORT_BF16 = 1, KVQ_PORT_FP16 = 2 };

#ifdef __cplusplus
extern "C" {
#endif

/* Required. */
int kvq_port_abi_version(void);   /* return KVQ_PORT_ABI_VERSION */
const char* kvq_port_recipe(void); /* the kvq recipe implemented, e.g. "nvfp4" (kvq recipes lists them) */
int kvq_port_memory(void);         /* KVQ_PORT_HOST or KVQ_PORT_DEVICE */
int kvq_port_quantize(const void* x, int dtype, int64_t rows, int64_t cols, int block, float global_scale,
                      uint8_t* codes, uint8_t* scales, void* stream);

/* Optional: kvq skips the properties of an entry point a library does not export. */
int kvq_port_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                        float global_scale, int dtype, void* y, void* stream);
/* The prefill workspace: rows*cols E4M3 codes of element * scale * factor, the exact product rounded once. */
int kvq_port_requantize_e4m3(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                             float factor, uint8_t* out, void* stream);
const char* kvq_port_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KVQ_PORT_H */
