/* SPDX-License-Identifier: MIT */
/*
 * Wire packet validation at forwarding speed.  The switch checks the CRC of
 * every packet, and the byte-at-a-time table of arctic/crc.h costs more than
 * the rest of forwarding together for a full-size packet, so on x86 CPUs
 * with SSE4.2 the CRC32 instruction (which computes exactly CRC-32C) does
 * the work.  sw_wire_check() is arctic_wire_check() with that CRC; the unit
 * tests and the fuzzer compare the two so they cannot drift apart.
 */
#include <string.h>

#include "switch-internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc32c_update_sse42(uint32_t state, const uint8_t *p,
                                    size_t len)
{
    uint64_t state64 = state;

    while (len >= 8) {
        uint64_t word;

        memcpy(&word, p, 8);
        state64 = _mm_crc32_u64(state64, word);
        p += 8;
        len -= 8;
    }
    state = (uint32_t)state64;
    while (len--) {
        state = _mm_crc32_u8(state, *p++);
    }
    return state;
}
#endif

static uint32_t crc32c_update_table(uint32_t state, const uint8_t *p,
                                    size_t len)
{
    return arctic_crc_update(state, p, len);
}

static uint32_t (*crc32c_update)(uint32_t, const uint8_t *, size_t) =
    crc32c_update_table;

void sw_crc_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc32c_update = crc32c_update_sse42;
    }
#endif
}

uint32_t sw_crc32c(const void *data, size_t len)
{
    return arctic_crc_final(crc32c_update(ARCTIC_CRC_INIT, data, len));
}

/* arctic_wire_check()'s checks with the fast CRC, so a packet gets the
 * same verdict (and drop reason) from the NIU and from the switch. */
enum arctic_wire_error sw_wire_check(const uint8_t *pkt, size_t size)
{
    return arctic_wire_check_crc(pkt, size, sw_crc32c);
}
