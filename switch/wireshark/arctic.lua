-- SPDX-License-Identifier: MIT
--
-- Wireshark/tshark dissector for arctic-switch pcap captures (link type
-- LINKTYPE_USER0 = 147, docs/network.md "pcap capture"): the 8-byte capture
-- header the switch adds (event, ports, drop reason), then the wire packet
-- of the emulated Arctic network: the NIU end-to-end header, Arctic word 0
-- (route low half: uproute, valid, priority), word 1 (downroute, endpoint,
-- type, mode, length), command words, payload, and the CRC-32C trailer,
-- which is verified.  Use:
--   tshark -X lua_script:switch/wireshark/arctic.lua -r capture.pcap -V
-- or copy the file into Wireshark's personal plugins folder.

local arctic = Proto("arctic", "Arctic network packet (arctic-switch)")

-- Bit operations: Lua 5.2 has bit32, Lua 5.3+ has operators.
local band, bxor, rshift
if bit32 then
    band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift
else
    band = load("return function(a, b) return a & b end")()
    bxor = load("return function(a, b) return a ~ b end")()
    rshift = load("return function(a, n) return (a & 0xffffffff) >> n end")()
end

-- CRC-32C (Castagnoli, reflected 0x82F63B78), as include/arctic/crc.h.
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then
            c = bxor(rshift(c, 1), 0x82F63B78)
        else
            c = rshift(c, 1)
        end
    end
    crc_table[i] = c
end

local function crc32c(tvb, offset, length)
    local crc = 0xFFFFFFFF
    for i = offset, offset + length - 1 do
        crc = bxor(crc_table[band(bxor(crc, tvb(i, 1):uint()), 0xFF)],
                   rshift(crc, 8))
    end
    return bxor(crc, 0xFFFFFFFF)
end

local events = { [1] = "ingress", [2] = "egress", [3] = "drop" }
local drop_reasons = {
    [0] = "none", [1] = "bad_crc", [2] = "bad_length", [3] = "bad_kind",
    [4] = "not_zero", [5] = "unknown_route", [6] = "port_down", [7] = "fault",
    [8] = "forged_source",
}
local kinds = { [1] = "DATA", [2] = "ACK", [3] = "NACK" }
local nack_reasons = {
    [0] = "none", [1] = "queue full", [2] = "rx off", [3] = "out of order",
    [4] = "bad endpoint", [5] = "wrong job", [6] = "resync", [7] = "rx error",
}
local priorities = { [0] = "low", [1] = "high" }

local f = arctic.fields
f.version = ProtoField.uint8("arctic.version", "Capture header version")
f.event = ProtoField.uint8("arctic.event", "Event", base.DEC, events)
f.drop_reason = ProtoField.uint8("arctic.drop_reason", "Drop reason",
                                 base.DEC, drop_reasons)
f.cflags = ProtoField.uint8("arctic.flags", "Fault flags", base.HEX)
f.corrupted = ProtoField.bool("arctic.flags.corrupted", "Corrupted by fault",
                              8, nil, 0x01)
f.duplicate = ProtoField.bool("arctic.flags.duplicate", "Duplicate copy",
                              8, nil, 0x02)
f.delayed = ProtoField.bool("arctic.flags.delayed", "Delayed by fault",
                            8, nil, 0x04)
f.in_port = ProtoField.uint16("arctic.in_port", "Ingress port")
f.out_port = ProtoField.uint16("arctic.out_port", "Egress port")
f.vtime = ProtoField.uint64("arctic.virtual_time",
    "Virtual time, ns (timed: stamp at ingress, taken at egress)")

f.kind = ProtoField.uint8("arctic.e2e.kind", "Kind", base.DEC, kinds)
f.e2e_flags = ProtoField.uint8("arctic.e2e.flags", "Flags", base.HEX)
f.e2e_prio = ProtoField.uint8("arctic.e2e.priority", "Stream priority",
                              base.DEC, priorities, 0x01)
f.e2e_reason = ProtoField.uint8("arctic.e2e.reason", "NACK reason",
                                base.DEC, nack_reasons, 0xF0)
f.e2e_ack_now = ProtoField.bool("arctic.e2e.ack_now",
                                "Ack at once (sender short of lines)", 8,
                                nil, 0x08)
f.src = ProtoField.uint16("arctic.e2e.src", "Source node")
f.dst = ProtoField.uint16("arctic.e2e.dst", "Destination node")
f.job = ProtoField.uint16("arctic.e2e.job", "Job tag")
f.incarnation = ProtoField.uint32("arctic.e2e.incarnation",
    "Receiver incarnation", base.HEX)
f.epoch = ProtoField.uint32("arctic.e2e.epoch", "Epoch")
f.seq = ProtoField.uint32("arctic.e2e.seq", "Sequence")

f.w0 = ProtoField.uint32("arctic.w0", "Word 0", base.HEX)
f.w0_hops = ProtoField.uint32("arctic.w0.hops", "Up hops", base.DEC, nil,
                              0x3C00)
f.w0_random = ProtoField.bool("arctic.w0.random", "Random up route", 32,
                              nil, 0x0200)
f.w0_choice = ProtoField.uint32("arctic.w0.choice", "Up port choices",
                                base.HEX, nil, 0x01FF)
f.w0_valid = ProtoField.bool("arctic.w0.valid", "Route valid", 32, nil,
                             0x4000)
f.w0_prio = ProtoField.uint32("arctic.w0.priority", "Priority", base.DEC,
                              priorities, 0x8000)
f.w1 = ProtoField.uint32("arctic.w1", "Word 1", base.HEX)
f.w1_down = ProtoField.uint32("arctic.w1.downroute", "Downroute", base.HEX,
                              nil, 0xFFFF0000)
f.w1_endpoint = ProtoField.uint32("arctic.w1.endpoint", "Endpoint",
                                  base.DEC, nil, 0xE000)
f.w1_type = ProtoField.uint32("arctic.w1.type", "Type", base.DEC, nil,
                              0x1FC0)
f.w1_mode = ProtoField.uint32("arctic.w1.mode", "Mode", base.DEC,
                              { [0] = "MPI", [1] = "DMA" }, 0x0020)
f.w1_length = ProtoField.uint32("arctic.w1.length", "Length (words)",
                                base.DEC, nil, 0x001F)
f.command0 = ProtoField.uint32("arctic.command0", "Command 0", base.HEX)
f.command1 = ProtoField.uint32("arctic.command1", "Command 1", base.HEX)
f.payload = ProtoField.bytes("arctic.payload", "Payload")
f.crc = ProtoField.uint32("arctic.crc", "CRC-32C", base.HEX)
f.crc_ok = ProtoField.bool("arctic.crc_ok", "CRC good")

local E2E_HEADER = 16

function arctic.dissector(tvb, pinfo, tree)
    -- Version 2, a timed switch's (docs/timed-mode.md), adds the virtual
    -- time, le64, after the 8 bytes of version 1.
    local CAPTURE_HEADER = 8
    if tvb:len() >= 1 and tvb(0, 1):uint() == 2 then
        CAPTURE_HEADER = 16
    end
    if tvb:len() < CAPTURE_HEADER + E2E_HEADER + 12 then
        return 0
    end
    pinfo.cols.protocol = "Arctic"
    local root = tree:add(arctic, tvb(), "Arctic packet")
    local event = tvb(1, 1):uint()
    local cap = root:add(arctic, tvb(0, CAPTURE_HEADER), "Capture header")
    if CAPTURE_HEADER == 16 then
        cap:add_le(f.vtime, tvb(8, 8))
    end
    cap:add(f.version, tvb(0, 1))
    cap:add(f.event, tvb(1, 1))
    cap:add(f.drop_reason, tvb(2, 1))
    local flags = cap:add(f.cflags, tvb(3, 1))
    flags:add(f.corrupted, tvb(3, 1))
    flags:add(f.duplicate, tvb(3, 1))
    flags:add(f.delayed, tvb(3, 1))
    cap:add_le(f.in_port, tvb(4, 2))
    cap:add_le(f.out_port, tvb(6, 2))

    local p = CAPTURE_HEADER
    local size = tvb:len() - CAPTURE_HEADER
    local e2e = root:add(arctic, tvb(p, E2E_HEADER), "End-to-end header")
    e2e:add(f.kind, tvb(p, 1))
    local ef = e2e:add(f.e2e_flags, tvb(p + 1, 1))
    ef:add(f.e2e_prio, tvb(p + 1, 1))
    ef:add(f.e2e_ack_now, tvb(p + 1, 1))
    ef:add(f.e2e_reason, tvb(p + 1, 1))
    e2e:add_le(f.src, tvb(p + 2, 2))
    e2e:add_le(f.dst, tvb(p + 4, 2))
    e2e:add_le(f.job, tvb(p + 6, 2))
    e2e:add_le(f.epoch, tvb(p + 8, 4))
    e2e:add_le(f.seq, tvb(p + 12, 4))

    local w = p + E2E_HEADER
    local w0 = root:add_le(f.w0, tvb(w, 4))
    w0:add_le(f.w0_hops, tvb(w, 4))
    w0:add_le(f.w0_random, tvb(w, 4))
    w0:add_le(f.w0_choice, tvb(w, 4))
    w0:add_le(f.w0_valid, tvb(w, 4))
    w0:add_le(f.w0_prio, tvb(w, 4))
    local w1 = root:add_le(f.w1, tvb(w + 4, 4))
    w1:add_le(f.w1_down, tvb(w + 4, 4))
    w1:add_le(f.w1_endpoint, tvb(w + 4, 4))
    w1:add_le(f.w1_type, tvb(w + 4, 4))
    w1:add_le(f.w1_mode, tvb(w + 4, 4))
    w1:add_le(f.w1_length, tvb(w + 4, 4))

    local crc_at = tvb:len() - 4
    local body = w + 8
    if tvb(p, 1):uint() ~= 1 and body + 4 == crc_at then
        -- an ACK or NACK: word 2 is the answering receiver's incarnation
        root:add_le(f.incarnation, tvb(body, 4))
        body = body + 4
    elseif body + 8 <= crc_at then
        root:add_le(f.command0, tvb(body, 4))
        root:add_le(f.command1, tvb(body + 4, 4))
        body = body + 8
    end
    if body < crc_at then
        root:add(f.payload, tvb(body, crc_at - body))
    end
    local crc = tvb(crc_at, 4):le_uint()
    root:add_le(f.crc, tvb(crc_at, 4))
    local good = crc32c(tvb, CAPTURE_HEADER, size - 4) == crc
    root:add(f.crc_ok, good)
    if not good then
        root:add_expert_info(PI_CHECKSUM, PI_WARN, "bad CRC-32C")
    end

    local kind = kinds[tvb(p, 1):uint()] or "?"
    pinfo.cols.src = tostring(tvb(4, 2):le_uint())
    pinfo.cols.dst = tostring(tvb(6, 2):le_uint())
    pinfo.cols.info = string.format("%s %s %u->%u seq %u %s%s",
        events[event] or "?", kind, tvb(p + 2, 2):le_uint(),
        tvb(p + 4, 2):le_uint(), tvb(p + 12, 4):le_uint(),
        priorities[rshift(band(tvb(w, 4):le_uint(), 0x8000), 15)],
        good and "" or " [bad CRC]")
    return tvb:len()
end

local encap = (wtap_encaps and wtap_encaps.USER0) or wtap.USER0
DissectorTable.get("wtap_encap"):add(encap, arctic)
