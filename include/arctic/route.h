/* SPDX-License-Identifier: MIT */
/*
 * Route bits of the emulated Arctic fat tree, and the one function that
 * computes a node's route table.  Shared by the switch (which follows the
 * bits), the guest driver (which loads the table with no manual set-up),
 * the qtests and the tools.  docs/network.md explains the topology.
 *
 * Topology: a binary fat tree (2-ary n-tree) of 4x4 Arctic routers, each
 * with two down ports and two up ports.  With L levels (0 = leaves) there
 * are 2^(L-1) routers per level and up to 2^L nodes.  Node n hangs off leaf
 * router n >> 1 at down port n & 1.  Router r of level l has parents at level
 * l + 1 whose numbers are r with bit l replaced by 0 or 1 (its up port
 * number); going down from level l, down port d leads to the router with
 * bit l - 1 of its number set to d (or, at level 0, to node 2r + d).
 *
 * Route bits (RouteEntry of seed 002 §4.4):
 *   uproute[13:10]  hops to climb before turning (0 = turn at the leaf)
 *   uproute[9]      RANDOM: the switch picks each parent at random
 *   uproute[8:0]    otherwise, bit h is the up port taken at hop h
 *   downroute[l]    the down port taken at level l, from the turn level
 *                   down to level 0
 * A packet from s to d must climb to level msb(s ^ d) (0 if s == d); the
 * parent choices are free, which is what makes the tree a fat tree.
 */
#ifndef ARCTIC_ROUTE_H
#define ARCTIC_ROUTE_H

#include "arctic/types.h"
#include "arctic/packet.h"

FIELD(UPROUTE, CHOICE, 0, 9)
FIELD(UPROUTE, RANDOM, 9, 1)
FIELD(UPROUTE, HOPS, 10, 4)

enum {
    ARCTIC_ROUTER_PORTS = 4,      /* a 4x4 Arctic router */
    ARCTIC_ROUTER_DOWN_PORTS = 2,
    ARCTIC_ROUTER_UP_PORTS = 2,
    ARCTIC_MAX_LEVELS = 9,        /* 2^9 > S = 256; UPROUTE.CHOICE width */
    /*
     * Route table index of each priority (seed 002 §6.2.1 step 5 reads
     * RouteTable[0] for the high-priority queue).
     */
    ARCTIC_ROUTE_TABLE_HIGH = 0,
    ARCTIC_ROUTE_TABLE_LOW = 1,
};

/* Levels of the smallest tree with at least @nodes ports (at least 1). */
static inline unsigned arctic_tree_levels(unsigned nodes)
{
    unsigned levels = 1;

    while ((1u << levels) < nodes) {
        levels++;
    }
    return levels;
}

/* Routers per level of a tree of @levels levels. */
static inline unsigned arctic_tree_routers_per_level(unsigned levels)
{
    return 1u << (levels - 1);
}

/* The level at which a packet from @src to @dst turns down. */
static inline unsigned arctic_turn_level(unsigned src, unsigned dst)
{
    unsigned diff = src ^ dst, level = 0;

    while (diff > 1) {
        diff >>= 1;
        level++;
    }
    return level;
}

/*
 * The route table entry node @src uses to reach node @dst at priority
 * @high.  The parent at hop h is bit h of the source ("source-mod-k"),
 * which spreads the nodes of one subtree over all its parents while keeping
 * every (src, dst) pair on one path, so each pair stays in FIFO order as
 * the DMA engine requires (seed 002 §6.2.2).  Set @random_up to let the
 * switch balance load instead (packets of a pair may then be reordered; the
 * NIU's sequence numbers put them back in order).
 */
static inline uint32_t arctic_route_entry(unsigned src, unsigned dst,
                                          bool high, bool random_up)
{
    unsigned hops = arctic_turn_level(src, dst);
    uint32_t choice = src & ((1u << hops) - 1);
    uint32_t up = ARCTIC_FIELD_PREP(UPROUTE, HOPS, hops) |
                  ARCTIC_FIELD_PREP(UPROUTE, RANDOM, random_up ? 1 : 0) |
                  ARCTIC_FIELD_PREP(UPROUTE, CHOICE, random_up ? 0 : choice);
    uint32_t down = dst & ((2u << hops) - 1);

    return ARCTIC_FIELD_PREP(ROUTE_ENTRY, UPROUTE, up) |
           ARCTIC_FIELD_PREP(ROUTE_ENTRY, VALID, 1) |
           ARCTIC_FIELD_PREP(ROUTE_ENTRY, PRIORITY, high ? 1 : 0) |
           ARCTIC_FIELD_PREP(ROUTE_ENTRY, DOWNROUTE, down);
}

/*
 * The node a packet from @src with Arctic words @w0 and @w1 reaches: below
 * the turn level the down bits name it, above it src and dst agree.  A
 * raw-mode (dMPI) sender gives route bits, not a node id; the NIU needs
 * the node for its end-to-end header.
 */
static inline unsigned arctic_route_destination(unsigned src, uint32_t w0,
                                                uint32_t w1)
{
    uint32_t up = ARCTIC_FIELD_GET(ARCTIC_W0, UPROUTE, w0);
    unsigned hops = ARCTIC_FIELD_GET(UPROUTE, HOPS, up);
    uint32_t mask = (2u << hops) - 1;

    return (src & ~mask) | (ARCTIC_FIELD_GET(ARCTIC_W1, DOWNROUTE, w1) & mask);
}

/*
 * The same for a tree of @levels levels: false if the route climbs to its
 * top or above (a switch drops such a packet), else the node in *@dst.
 */
static inline bool arctic_route_in_tree(unsigned src, unsigned levels,
                                        uint32_t w0, uint32_t w1,
                                        unsigned *dst)
{
    uint32_t up = ARCTIC_FIELD_GET(ARCTIC_W0, UPROUTE, w0);

    if (ARCTIC_FIELD_GET(UPROUTE, HOPS, up) >= levels) {
        return false;
    }
    *dst = arctic_route_destination(src, w0, w1);
    return true;
}

/*
 * Fill @table[2][num_nodes] (ARCTIC_ROUTE_TABLE_HIGH/LOW rows) for node
 * @self.  This is what a driver loads at probe time.
 */
static inline void arctic_route_table_fill(uint32_t *table, unsigned self,
                                           unsigned num_nodes)
{
    unsigned dst;

    for (dst = 0; dst < num_nodes; dst++) {
        table[ARCTIC_ROUTE_TABLE_HIGH * num_nodes + dst] =
            arctic_route_entry(self, dst, true, false);
        table[ARCTIC_ROUTE_TABLE_LOW * num_nodes + dst] =
            arctic_route_entry(self, dst, false, false);
    }
}

#endif /* ARCTIC_ROUTE_H */
