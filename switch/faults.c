/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for testing the NIU's recovery: per port and priority
 * probabilities of dropping, duplicating, corrupting and delaying the
 * packets the switch delivers to that port.  Each (port, priority) has its
 * own random stream derived from the seed, and every packet draws the same
 * count of numbers whatever is decided, so the k-th packet delivered to a
 * port gets the same fate in every run with the same seed, however the
 * traffic to other ports interleaves.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>

#include "switch-internal.h"

static guint32 stream_seed(uint64_t seed, unsigned port, unsigned priority)
{
    /* splitmix64 finaliser: neighbouring ports get unrelated streams. */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (1 + port * 2 + priority);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (guint32)(z ^ (z >> 31));
}

void arctic_switch_reseed(ArcticSwitch *sw, uint64_t seed)
{
    unsigned port, prio;

    sw->seed = seed;
    for (port = 0; port < sw->ports; port++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            g_rand_set_seed(sw->port[port].fault[prio].rand,
                            stream_seed(seed, port, prio));
        }
    }
    g_rand_set_seed(sw->route_rand, stream_seed(seed, SW_NO_PORT, 0));
}

void sw_faults_init(ArcticSwitch *sw)
{
    unsigned port, prio;

    for (port = 0; port < sw->ports; port++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            struct sw_fault_state *f = &sw->port[port].fault[prio];

            f->rand = g_rand_new();
            f->params.delay_us = ARCTIC_SWITCH_DEFAULT_DELAY_US;
        }
    }
    sw->route_rand = g_rand_new();
    arctic_switch_reseed(sw, sw->config.seed);
}

void sw_faults_free(ArcticSwitch *sw)
{
    unsigned port, prio;

    for (port = 0; sw->port && port < sw->ports; port++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            g_clear_pointer(&sw->port[port].fault[prio].rand, g_rand_free);
        }
    }
    g_clear_pointer(&sw->route_rand, g_rand_free);
}

static bool probability_ok(double p)
{
    return p >= 0.0 && p <= 1.0;
}

bool arctic_switch_set_faults(ArcticSwitch *sw, int port, int priority,
                              const struct arctic_fault_params *params,
                              GError **errp)
{
    unsigned first_port = 0, last_port = sw->ports - 1;
    unsigned first_prio = 0, last_prio = ARCTIC_NUM_PRIORITIES - 1, i, j;

    if (port >= (int)sw->ports || port < -1) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "port %d out of range (the switch has %u ports)",
                    port, sw->ports);
        return false;
    }
    if (priority < -1 || priority >= ARCTIC_NUM_PRIORITIES) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "priority %d is neither 0 (low) nor 1 (high)", priority);
        return false;
    }
    if (!probability_ok(params->drop) || !probability_ok(params->duplicate) ||
        !probability_ok(params->corrupt) || !probability_ok(params->delay)) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "fault probabilities must lie in [0, 1]");
        return false;
    }
    if (params->delay_us > SW_FAULT_MAX_DELAY_US) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "delay of %u us is more than 10 s", params->delay_us);
        return false;
    }
    if (port >= 0) {
        first_port = last_port = port;
    }
    if (priority >= 0) {
        first_prio = last_prio = priority;
    }
    for (i = first_port; i <= last_port; i++) {
        for (j = first_prio; j <= last_prio; j++) {
            struct sw_fault_state *f = &sw->port[i].fault[j];

            f->params = *params;
            f->active = params->drop > 0 || params->duplicate > 0 ||
                        params->corrupt > 0 || params->delay > 0;
        }
    }
    /* Faults apply to every packet: none may skip the switch now. */
    if (sw->hooks.watching_changed) {
        sw->hooks.watching_changed(sw);
    }
    return true;
}

void arctic_switch_get_faults(ArcticSwitch *sw, unsigned port,
                              unsigned priority,
                              struct arctic_fault_params *params)
{
    *params = sw->port[port].fault[priority].params;
}

/* One decision per packet; always five draws (see the file comment). */
void sw_fault_decide(ArcticSwitch *sw, unsigned port_no, unsigned priority,
                     struct sw_packet *p)
{
    struct sw_fault_state *f = &sw->port[port_no].fault[priority];
    struct arctic_port_prio_stats *st = &sw->port[port_no].stats.prio[priority];
    double drop, duplicate, corrupt, delay;
    guint32 bit;

    p->flags |= SW_FAULT_DECIDED;
    if (!f->active) {
        return;
    }
    drop = g_rand_double(f->rand);
    duplicate = g_rand_double(f->rand);
    corrupt = g_rand_double(f->rand);
    delay = g_rand_double(f->rand);
    bit = g_rand_int(f->rand);
    if (drop < f->params.drop) {
        p->flags |= SW_FAULT_DROP;
        return;
    }
    if (duplicate < f->params.duplicate) {
        p->copies_left = 2;
        st->duplicated++;
    }
    if (corrupt < f->params.corrupt) {
        p->flags |= SW_FAULT_CORRUPT;
        p->corrupt_bit = bit % (8u * p->size);
        st->corrupted++;
    }
    if (delay < f->params.delay) {
        p->flags |= SW_FAULT_DELAY;
    }
}

enum sw_fault_key sw_fault_key(const char *name)
{
    static const struct {
        const char *name;
        enum sw_fault_key key;
    } names[] = {
        { "drop", SW_FAULT_KEY_DROP },
        { "duplicate", SW_FAULT_KEY_DUPLICATE },
        { "dup", SW_FAULT_KEY_DUPLICATE },
        { "corrupt", SW_FAULT_KEY_CORRUPT },
        { "delay", SW_FAULT_KEY_DELAY },
        { "reorder", SW_FAULT_KEY_DELAY },
        { "delay_us", SW_FAULT_KEY_DELAY_US },
        { "delay-us", SW_FAULT_KEY_DELAY_US },
    };
    unsigned i;

    for (i = 0; i < G_N_ELEMENTS(names); i++) {
        if (!strcmp(name, names[i].name)) {
            return names[i].key;
        }
    }
    return SW_FAULT_KEY_NONE;
}

static bool parse_probability(const char *key, const char *value,
                              double *out, GError **errp)
{
    char *end;
    double v;

    errno = 0;
    v = g_ascii_strtod(value, &end);
    if (errno || end == value || *end || !probability_ok(v)) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "fault %s=%s: want a probability between 0 and 1",
                    key, value);
        return false;
    }
    *out = v;
    return true;
}

bool arctic_fault_spec_parse(const char *spec, int *port, int *priority,
                             struct arctic_fault_params *params,
                             GError **errp)
{
    g_auto(GStrv) fields = g_strsplit(spec, ":", 3);
    g_auto(GStrv) settings = NULL;
    unsigned n = g_strv_length(fields), i;
    const char *list;

    memset(params, 0, sizeof(*params));
    params->delay_us = ARCTIC_SWITCH_DEFAULT_DELAY_US;
    *priority = -1;
    if (n < 2) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "fault \"%s\": want PORT[:PRIORITY]:KEY=VALUE,... "
                    "(e.g. \"3:low:drop=0.1,delay=0.05\")", spec);
        return false;
    }
    if (!strcmp(fields[0], "*") || !strcmp(fields[0], "all")) {
        *port = -1;
    } else {
        guint64 v;

        if (!g_ascii_string_to_unsigned(fields[0], 10, 0,
                                        ARCTIC_LINK_MAX_NODES - 1, &v, NULL)) {
            g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "fault \"%s\": port \"%s\" is not a number 0..%d or "
                        "\"*\"", spec, fields[0], ARCTIC_LINK_MAX_NODES - 1);
            return false;
        }
        *port = (int)v;
    }
    list = fields[1];
    if (n == 3) {
        if (!strcmp(fields[1], "low")) {
            *priority = ARCTIC_PRIORITY_LOW;
        } else if (!strcmp(fields[1], "high")) {
            *priority = ARCTIC_PRIORITY_HIGH;
        } else if (strcmp(fields[1], "both") && strcmp(fields[1], "*")) {
            g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "fault \"%s\": priority \"%s\" is not low, high or "
                        "both", spec, fields[1]);
            return false;
        }
        list = fields[2];
    }
    settings = g_strsplit(list, ",", -1);
    for (i = 0; settings[i]; i++) {
        const char *eq = strchr(settings[i], '=');
        g_autofree char *key = NULL;
        const char *value;
        bool ok;

        if (!eq) {
            g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "fault \"%s\": \"%s\" is not KEY=VALUE", spec,
                        settings[i]);
            return false;
        }
        key = g_strndup(settings[i], eq - settings[i]);
        value = eq + 1;
        switch (sw_fault_key(key)) {
        case SW_FAULT_KEY_DROP:
            ok = parse_probability(key, value, &params->drop, errp);
            break;
        case SW_FAULT_KEY_DUPLICATE:
            ok = parse_probability(key, value, &params->duplicate, errp);
            break;
        case SW_FAULT_KEY_CORRUPT:
            ok = parse_probability(key, value, &params->corrupt, errp);
            break;
        case SW_FAULT_KEY_DELAY:
            ok = parse_probability(key, value, &params->delay, errp);
            break;
        case SW_FAULT_KEY_DELAY_US: {
            guint64 v = 0;

            ok = g_ascii_string_to_unsigned(value, 10, 0,
                                            SW_FAULT_MAX_DELAY_US, &v, NULL);
            if (ok) {
                params->delay_us = (uint32_t)v;
            } else {
                g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                            "fault %s=%s: want microseconds, at most %d",
                            key, value, SW_FAULT_MAX_DELAY_US);
            }
            break;
        }
        default:
            g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "fault \"%s\": unknown key \"%s\" (%s)", spec, key,
                        SW_FAULT_KEYS);
            return false;
        }
        if (!ok) {
            return false;
        }
    }
    return true;
}
