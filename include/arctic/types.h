/* SPDX-License-Identifier: MIT */
/*
 * Base types and helpers for the Arctic NIU hardware contract.
 *
 * The headers under include/arctic/ are shared verbatim by the QEMU device,
 * the arctic-switch process, the qtests, the Linux guest driver and the
 * user-level library, so they depend on nothing but fixed-width integer types.
 * Everything the NIU reads from or writes to guest memory, and everything on
 * the emulated link, is little-endian; the byte-wise accessors below are the
 * portable way to read and write those fields from any of those programs.
 */
#ifndef ARCTIC_TYPES_H
#define ARCTIC_TYPES_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/stddef.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

/*
 * Register and field declarations.  Inside QEMU these are the macros of
 * include/hw/registerfields.h (include it first); everywhere else the same
 * names are produced by the fallbacks below, so a driver says
 * A_NIU_TX_CTRL and R_NIU_TX_CTRL_ENABLE_MASK exactly as the device does.
 */
#define ARCTIC_MASK32(shift, length) \
    ((uint32_t)((~0ull >> (64 - (length))) << (shift)))

#ifndef REG32
#define REG32(reg, addr)                                  \
    enum { A_ ## reg = (addr) };                          \
    enum { R_ ## reg = (addr) / 4 };
#endif

#ifndef FIELD
#define FIELD(reg, field, shift, length)                                  \
    enum { R_ ## reg ## _ ## field ## _SHIFT = (shift) };                 \
    enum { R_ ## reg ## _ ## field ## _LENGTH = (length) };               \
    enum { R_ ## reg ## _ ## field ## _MASK =                             \
                                   ARCTIC_MASK32(shift, length) };
#endif

/* Extract and deposit a FIELD() of a 32-bit value without QEMU's helpers. */
#define ARCTIC_FIELD_GET(reg, field, value)                               \
    (((uint32_t)(value) & R_ ## reg ## _ ## field ## _MASK) >>            \
     R_ ## reg ## _ ## field ## _SHIFT)
#define ARCTIC_FIELD_PREP(reg, field, value)                              \
    (((uint32_t)(value) << R_ ## reg ## _ ## field ## _SHIFT) &           \
     R_ ## reg ## _ ## field ## _MASK)

static inline uint16_t arctic_get_le16(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;

    return (uint16_t)(b[0] | (b[1] << 8));
}

static inline uint32_t arctic_get_le32(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;

    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) |
           ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static inline uint64_t arctic_get_le64(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;

    return (uint64_t)arctic_get_le32(b) |
           ((uint64_t)arctic_get_le32(b + 4) << 32);
}

static inline void arctic_put_le16(void *p, uint16_t v)
{
    uint8_t *b = (uint8_t *)p;

    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

static inline void arctic_put_le32(void *p, uint32_t v)
{
    uint8_t *b = (uint8_t *)p;

    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static inline void arctic_put_le64(void *p, uint64_t v)
{
    arctic_put_le32(p, (uint32_t)v);
    arctic_put_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

#endif /* ARCTIC_TYPES_H */
