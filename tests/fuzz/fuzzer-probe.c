/* SPDX-License-Identifier: MIT */
/* Configure-time probe: does this clang build and link -fsanitize=fuzzer? */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return data && size ? 0 : 0;
}
