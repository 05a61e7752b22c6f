-- rocelab.lua: Wireshark dissectors for the telemetry formats Wireshark lacks and for
-- rocelab's probe packets. Install with `rocelab wireshark install` (copies this file
-- to ~/.local/lib/wireshark/plugins) or load with `tshark -X lua_script:rocelab.lua`.
--
--   rocelab.int    P4.org INT v2.1 INT-MD / INT-MX over UDP, on the configured DSCP
--   rocelab.hpcc   the HPCC simulator's 64-bit hops in rocelab's UDP shim (DSCP)
--   rocelab.ifa    IFA 2.0 on IP protocol 253 (configurable)
--
-- Besides the configured signals, rocelab's own are honoured, so that a lab's captures
-- dissect as they stand: INT-MD requests on DSCP 0x1B, INT-MD and HPCC-block echoes on
-- 0x1D, IFA echoes on IP protocol 254 (roce/telemetry: RequestDSCPINT, EchoDSCP,
-- EchoProtocol).
--   rocelab.probe  telemetry request (BTH opcode 0xC0) and response (0xC1) bodies
--
-- The UDP dissectors are heuristics; RoCEv2 owns UDP port 4791, so enable
-- "Try heuristic sub-dissectors first" (tshark: -o udp.try_heuristic_first:TRUE).
-- Layouts: docs/telemetry.md and docs/wire-format.md.

local f_dscp4 = Field.new("ip.dsfield.dscp")
local f_dscp6 = Field.new("ipv6.tclass.dscp")

local function dscp()
  local v = f_dscp4() or f_dscp6()
  return v and v.value or -1
end

local LAB_REQUEST_DSCP_INT, LAB_ECHO_DSCP, LAB_ECHO_PROTOCOL = 0x1B, 0x1D, 254

---------------------------------------------------------------------------- INT
local int = Proto("rocelab.int", "In-band Network Telemetry v2.1 (rocelab)")
int.prefs.dscp = Pref.uint("DSCP", 0x17, "DSCP value marking INT over UDP")
local F = {
  type = ProtoField.uint8("rocelab.int.type", "Type", base.DEC, {[1]="INT-MD", [3]="INT-MX"}, 0xF0),
  npt = ProtoField.uint8("rocelab.int.npt", "NPT", base.DEC, nil, 0x0C),
  length = ProtoField.uint8("rocelab.int.length", "Length (words)"),
  orig_dscp = ProtoField.uint8("rocelab.int.orig_dscp", "Original DSCP", base.HEX, nil, 0xFC),
  ver = ProtoField.uint8("rocelab.int.ver", "Version", base.DEC, nil, 0xF0),
  d = ProtoField.bool("rocelab.int.d", "D", 8, nil, 0x08),
  e = ProtoField.bool("rocelab.int.e", "E (hop count exceeded)", 8, nil, 0x04),
  m = ProtoField.bool("rocelab.int.m", "M (MTU exceeded)", 8, nil, 0x02),
  hop_ml = ProtoField.uint8("rocelab.int.hop_ml", "Hop ML (words)", base.DEC, nil, 0x1F),
  rhc = ProtoField.uint8("rocelab.int.remaining_hop_count", "Remaining Hop Count"),
  bitmap = ProtoField.uint16("rocelab.int.instruction_bitmap", "Instruction Bitmap", base.HEX),
  ds_id = ProtoField.uint16("rocelab.int.domain_id", "Domain Specific ID", base.HEX),
  ds_inst = ProtoField.uint16("rocelab.int.ds_instructions", "DS Instruction", base.HEX),
  ds_flags = ProtoField.uint16("rocelab.int.ds_flags", "DS Flags", base.HEX),
  hop = ProtoField.bytes("rocelab.int.hop", "Hop metadata"),
  node_id = ProtoField.uint32("rocelab.int.node_id", "Node ID", base.HEX),
  l1_in = ProtoField.uint16("rocelab.int.l1_ingress_port", "L1 ingress port"),
  l1_out = ProtoField.uint16("rocelab.int.l1_egress_port", "L1 egress port"),
  latency = ProtoField.uint32("rocelab.int.hop_latency", "Hop latency"),
  qid = ProtoField.uint8("rocelab.int.queue_id", "Queue ID"),
  qocc = ProtoField.uint24("rocelab.int.queue_occupancy", "Queue occupancy"),
  ing_ts = ProtoField.uint64("rocelab.int.ingress_ts", "Ingress timestamp"),
  eg_ts = ProtoField.uint64("rocelab.int.egress_ts", "Egress timestamp"),
  l2_in = ProtoField.uint32("rocelab.int.l2_ingress_port", "L2 ingress port"),
  l2_out = ProtoField.uint32("rocelab.int.l2_egress_port", "L2 egress port"),
  tx_util = ProtoField.uint32("rocelab.int.tx_utilization", "Egress Tx utilization", base.HEX),
  buf_id = ProtoField.uint8("rocelab.int.buffer_id", "Buffer ID"),
  buf_occ = ProtoField.uint24("rocelab.int.buffer_occupancy", "Buffer occupancy"),
  reserved = ProtoField.uint32("rocelab.int.reserved_data", "Reserved instruction data", base.HEX),
  csum = ProtoField.uint32("rocelab.int.checksum_complement", "Checksum complement", base.HEX),
  tx_bytes = ProtoField.uint64("rocelab.int.tx_bytes", "Tx bytes (rocelab HPCC domain)"),
  rate = ProtoField.uint32("rocelab.int.line_rate_mbps", "Line rate Mb/s (rocelab HPCC domain)"),
}
int.fields = F

local function dissect_int_hop(tvb, tree, bitmap, dsid, dsinst)
  local p = 0
  for i = 0, 15 do
    if bit.band(bitmap, bit.lshift(1, 15 - i)) ~= 0 then
      if i == 0 then tree:add(F.node_id, tvb(p, 4)); p = p + 4
      elseif i == 1 then tree:add(F.l1_in, tvb(p, 2)); tree:add(F.l1_out, tvb(p + 2, 2)); p = p + 4
      elseif i == 2 then tree:add(F.latency, tvb(p, 4)); p = p + 4
      elseif i == 3 then tree:add(F.qid, tvb(p, 1)); tree:add(F.qocc, tvb(p + 1, 3)); p = p + 4
      elseif i == 4 then tree:add(F.ing_ts, tvb(p, 8)); p = p + 8
      elseif i == 5 then tree:add(F.eg_ts, tvb(p, 8)); p = p + 8
      elseif i == 6 then tree:add(F.l2_in, tvb(p, 4)); tree:add(F.l2_out, tvb(p + 4, 4)); p = p + 8
      elseif i == 7 then tree:add(F.tx_util, tvb(p, 4)); p = p + 4
      elseif i == 8 then tree:add(F.buf_id, tvb(p, 1)); tree:add(F.buf_occ, tvb(p + 1, 3)); p = p + 4
      elseif i == 15 then tree:add(F.csum, tvb(p, 4)); p = p + 4
      else tree:add(F.reserved, tvb(p, 4)); p = p + 4 end
    end
  end
  if dsid == 0x4850 then
    if bit.band(dsinst, 0x8000) ~= 0 then tree:add(F.tx_bytes, tvb(p, 8)); p = p + 8 end
    if bit.band(dsinst, 0x4000) ~= 0 then tree:add(F.rate, tvb(p, 4)); p = p + 4 end
  end
end

local function int_heuristic(tvb, pinfo, tree)
  local d = dscp()
  if tvb:len() < 16 or (d ~= int.prefs.dscp and d ~= LAB_REQUEST_DSCP_INT and d ~= LAB_ECHO_DSCP) then return false end
  local typ = bit.rshift(tvb(0, 1):uint(), 4)
  if (typ ~= 1 and typ ~= 3) or bit.rshift(tvb(4, 1):uint(), 4) ~= 2 then return false end
  local size = 4 + 4 * tvb(1, 1):uint()
  if size > tvb:len() then return false end
  local t = tree:add(int, tvb(0, size))
  t:add(F.type, tvb(0, 1)); t:add(F.npt, tvb(0, 1)); t:add(F.length, tvb(1, 1)); t:add(F.orig_dscp, tvb(3, 1))
  t:add(F.ver, tvb(4, 1)); t:add(F.d, tvb(4, 1))
  local bitmap, dsid, dsinst = tvb(8, 2):uint(), tvb(10, 2):uint(), tvb(12, 2):uint()
  if typ == 1 then
    t:add(F.e, tvb(4, 1)); t:add(F.m, tvb(4, 1)); t:add(F.hop_ml, tvb(6, 1)); t:add(F.rhc, tvb(7, 1))
  end
  t:add(F.bitmap, tvb(8, 2)); t:add(F.ds_id, tvb(10, 2)); t:add(F.ds_inst, tvb(12, 2)); t:add(F.ds_flags, tvb(14, 2))
  local ml = 4 * bit.band(tvb(6, 1):uint(), 0x1F)
  if typ == 1 and ml > 0 then
    for off = 16, size - ml, ml do
      dissect_int_hop(tvb(off, ml):tvb(), t:add(F.hop, tvb(off, ml)), bitmap, dsid, dsinst)
    end
  end
  pinfo.cols.protocol:append("/INT")
  Dissector.get("data"):call(tvb(size):tvb(), pinfo, tree)
  return true
end
int:register_heuristic("udp", int_heuristic)

---------------------------------------------------------------------------- HPCC
local hpcc = Proto("rocelab.hpcc", "HPCC compact hops (rocelab carriage)")
hpcc.prefs.dscp = Pref.uint("DSCP", 0x19, "DSCP value marking the HPCC block")
hpcc.prefs.multi = Pref.uint("Multi", 1, "INT multiplier of the simulator (units of 128*multi and 80*multi bytes)")
local H = {
  ver = ProtoField.uint8("rocelab.hpcc.version", "Version", base.DEC, nil, 0xF0),
  x = ProtoField.bool("rocelab.hpcc.rate_table", "X: rate table present", 8, nil, 0x08),
  e = ProtoField.bool("rocelab.hpcc.error", "E: a switch could not record its hop", 8, nil, 0x04),
  orig_dscp = ProtoField.uint8("rocelab.hpcc.orig_dscp", "Original DSCP", base.HEX, nil, 0xFC),
  nhop = ProtoField.uint16("rocelab.hpcc.nhop", "Hop count"),
  slot = ProtoField.bytes("rocelab.hpcc.slot", "Hop slot"),
  code = ProtoField.uint8("rocelab.hpcc.rate_code", "Rate code (7: rate in the rate table)"),
  rate = ProtoField.uint64("rocelab.hpcc.rate_bps", "Line rate (bit/s)"),
  time = ProtoField.uint32("rocelab.hpcc.time_ns", "Time (ns mod 2^24)"),
  bytes = ProtoField.uint64("rocelab.hpcc.tx_bytes", "Tx bytes (scaled back)"),
  qlen = ProtoField.uint64("rocelab.hpcc.qlen_bytes", "Queue length bytes (scaled back)"),
}
hpcc.fields = H
local rates = {[0]=25e9, [1]=50e9, [2]=100e9, [3]=200e9, [4]=400e9}

-- rocelab's rate extension (docs/telemetry.md): with X set, five 32-bit big-endian
-- rates in Mb/s follow the slots, one per slot; a hop with rate code 7 reads its rate
-- from the entry of its slot.
local function hpcc_heuristic(tvb, pinfo, tree)
  local d = dscp()
  if tvb:len() < 44 or (d ~= hpcc.prefs.dscp and d ~= LAB_ECHO_DSCP) or bit.rshift(tvb(0, 1):uint(), 4) ~= 1 then return false end
  local size = 44
  local ext = bit.band(tvb(0, 1):uint(), 0x08) ~= 0
  if ext then size = 64 end
  if tvb:len() < size then return false end
  local t = tree:add(hpcc, tvb(0, size))
  t:add(H.ver, tvb(0, 1)); t:add(H.x, tvb(0, 1)); t:add(H.e, tvb(0, 1))
  t:add(H.orig_dscp, tvb(1, 1)); t:add(H.nhop, tvb(2, 2))
  local nhop = tvb(2, 2):uint()
  local n, first = math.min(nhop, 5), 0
  if nhop > 5 then first = nhop % 5 end
  local m = hpcc.prefs.multi
  for k = 0, n - 1 do
    local i = (first + k) % 5
    local r = tvb(4 + 8 * i, 8)
    local w = r:le_uint64()
    local s = t:add(H.slot, r)
    local code = w:band(7):tonumber()
    s:add(H.code, r, code)
    if code == 7 and ext then
      s:add(H.rate, tvb(44 + 4 * i, 4), UInt64.new(tvb(44 + 4 * i, 4):uint()) * 1000000)
    else
      s:add(H.rate, r, UInt64.new(rates[code] or 0))
    end
    s:add(H.time, r, w:rshift(3):band(0xFFFFFF):tonumber())
    s:add(H.bytes, r, w:rshift(27):band(0xFFFFF) * (128 * m))
    s:add(H.qlen, r, w:rshift(47):band(0x1FFFF) * (80 * m))
  end
  pinfo.cols.protocol:append("/HPCC")
  Dissector.get("data"):call(tvb(size):tvb(), pinfo, tree)
  return true
end
hpcc:register_heuristic("udp", hpcc_heuristic)

---------------------------------------------------------------------------- IFA
local ifa = Proto("rocelab.ifa", "Inband Flow Analyzer 2.0 (rocelab)")
ifa.prefs.protocol = Pref.uint("IP protocol", 253, "IP protocol number of IFA")
local A = {
  ver = ProtoField.uint8("rocelab.ifa.version", "Version", base.DEC, nil, 0xF0),
  gns = ProtoField.uint8("rocelab.ifa.gns", "GNS", base.HEX, nil, 0x0F),
  next = ProtoField.uint8("rocelab.ifa.next_header", "Next Header"),
  flags = ProtoField.uint8("rocelab.ifa.flags", "Flags", base.HEX),
  mf = ProtoField.bool("rocelab.ifa.mf", "MF", 8, nil, 0x10),
  maxlen = ProtoField.uint8("rocelab.ifa.max_length", "Max Length (words)"),
  sport = ProtoField.uint16("rocelab.ifa.udp_srcport", "UDP source port"),
  dport = ProtoField.uint16("rocelab.ifa.udp_dstport", "UDP destination port"),
  ulen = ProtoField.uint16("rocelab.ifa.udp_length", "UDP length"),
  rv = ProtoField.uint8("rocelab.ifa.request_vector", "Request Vector", base.HEX),
  av = ProtoField.uint8("rocelab.ifa.action_vector", "Action Vector", base.HEX),
  hl = ProtoField.uint8("rocelab.ifa.hop_limit", "Hop Limit"),
  curlen = ProtoField.uint8("rocelab.ifa.current_length", "Current Length (words)"),
  hop = ProtoField.bytes("rocelab.ifa.hop", "Hop record"),
  lns = ProtoField.uint32("rocelab.ifa.lns", "LNS", base.HEX, nil, 0xF0000000),
  dev = ProtoField.uint32("rocelab.ifa.device_id", "Device ID", base.HEX, nil, 0x0FFFFF00),
  ttl = ProtoField.uint32("rocelab.ifa.ttl", "IP TTL", base.DEC, nil, 0x000000FF),
  speed = ProtoField.uint32("rocelab.ifa.port_speed", "Port speed code", base.DEC, nil, 0xF0000000),
  cong = ProtoField.uint32("rocelab.ifa.congestion", "Congestion", base.DEC, nil, 0x0C000000),
  qid = ProtoField.uint32("rocelab.ifa.queue_id", "Queue ID", base.DEC, nil, 0x03F00000),
  rxsec = ProtoField.uint32("rocelab.ifa.rx_ts_sec", "Rx timestamp seconds", base.DEC, nil, 0x000FFFFF),
  eport = ProtoField.uint16("rocelab.ifa.egress_port", "Egress port"),
  iport = ProtoField.uint16("rocelab.ifa.ingress_port", "Ingress port"),
  rxns = ProtoField.uint32("rocelab.ifa.rx_ts_ns", "Rx timestamp nanoseconds"),
  res = ProtoField.uint32("rocelab.ifa.residence_ns", "Residence time (ns)"),
  txb = ProtoField.uint32("rocelab.ifa.tx_bytes", "Opaque 0: tx bytes mod 2^32 (rocelab HPCC profile)"),
  qd = ProtoField.uint32("rocelab.ifa.queue_depth", "Opaque 1: queue depth bytes (rocelab HPCC profile)"),
  mbps = ProtoField.uint32("rocelab.ifa.line_rate_mbps", "Opaque 2: line rate Mb/s (rocelab HPCC profile)"),
}
ifa.fields = A

function ifa.dissector(tvb, pinfo, tree)
  if tvb:len() < 16 then return 0 end
  local curlen = 4 * tvb(15, 1):uint()
  local t = tree:add(ifa, tvb(0, 16 + curlen))
  t:add(A.ver, tvb(0, 1)); t:add(A.gns, tvb(0, 1)); t:add(A.next, tvb(1, 1))
  t:add(A.flags, tvb(2, 1)); t:add(A.mf, tvb(2, 1)); t:add(A.maxlen, tvb(3, 1))
  t:add(A.sport, tvb(4, 2)); t:add(A.dport, tvb(6, 2)); t:add(A.ulen, tvb(8, 2))
  t:add(A.rv, tvb(12, 1)); t:add(A.av, tvb(13, 1)); t:add(A.hl, tvb(14, 1)); t:add(A.curlen, tvb(15, 1))
  for off = 16, 16 + curlen - 32, 32 do
    local h = t:add(A.hop, tvb(off, 32))
    h:add(A.lns, tvb(off, 4)); h:add(A.dev, tvb(off, 4)); h:add(A.ttl, tvb(off, 4))
    h:add(A.speed, tvb(off + 4, 4)); h:add(A.cong, tvb(off + 4, 4)); h:add(A.qid, tvb(off + 4, 4)); h:add(A.rxsec, tvb(off + 4, 4))
    h:add(A.eport, tvb(off + 8, 2)); h:add(A.iport, tvb(off + 10, 2))
    h:add(A.rxns, tvb(off + 12, 4)); h:add(A.res, tvb(off + 16, 4))
    h:add(A.txb, tvb(off + 20, 4)); h:add(A.qd, tvb(off + 24, 4)); h:add(A.mbps, tvb(off + 28, 4))
  end
  pinfo.cols.protocol = "IFA"
  Dissector.get("data"):call(tvb(16 + curlen):tvb(), pinfo, tree)
  return tvb:len()
end
DissectorTable.get("ip.proto"):add(ifa.prefs.protocol, ifa)
DissectorTable.get("ip.proto"):add(LAB_ECHO_PROTOCOL, ifa)

---------------------------------------------------------------------------- probes
local probe = Proto("rocelab.probe", "rocelab telemetry probe")
local P = {
  opcode = ProtoField.uint8("rocelab.probe.opcode", "BTH opcode", base.HEX, {[0xC0]="ROCELAB_TELEMETRY_REQUEST", [0xC1]="ROCELAB_TELEMETRY_RESPONSE"}),
  destqp = ProtoField.uint24("rocelab.probe.dest_qp", "Destination QP", base.HEX),
  psn = ProtoField.uint24("rocelab.probe.psn", "PSN"),
  ver = ProtoField.uint8("rocelab.probe.version", "Version", base.DEC, nil, 0xF0),
  all = ProtoField.bool("rocelab.probe.all_hops", "All hops", 8, nil, 0x01),
  path_hops = ProtoField.uint8("rocelab.probe.path_hops", "Path hops"),
  records = ProtoField.uint8("rocelab.probe.records", "Records"),
  seq = ProtoField.uint32("rocelab.probe.seq", "Sequence number"),
  send_ts = ProtoField.uint64("rocelab.probe.send_ts", "Send timestamp (ns)"),
  rec = ProtoField.bytes("rocelab.probe.record", "Hop record"),
  index = ProtoField.uint8("rocelab.probe.hop_index", "Hop index"),
  mask = ProtoField.uint8("rocelab.probe.field_mask", "Field mask", base.HEX),
  iport = ProtoField.uint32("rocelab.probe.ingress_port", "Ingress port"),
  ts = ProtoField.uint64("rocelab.probe.ts_ns", "Egress timestamp (ns)"),
  qlen = ProtoField.uint64("rocelab.probe.qlen_bytes", "Queue length (bytes)"),
  txb = ProtoField.uint64("rocelab.probe.tx_bytes", "Tx bytes"),
  rate = ProtoField.uint64("rocelab.probe.bw_bps", "Line rate (bit/s)"),
  sw = ProtoField.uint32("rocelab.probe.switch_id", "Switch ID", base.HEX),
  eport = ProtoField.uint32("rocelab.probe.egress_port", "Egress port"),
  icrc = ProtoField.uint32("rocelab.probe.icrc", "ICRC", base.HEX),
}
probe.fields = P

local function probe_heuristic(tvb, pinfo, tree)
  if tvb:len() < 12 + 16 + 4 then return false end
  local op = tvb(0, 1):uint()
  if op ~= 0xC0 and op ~= 0xC1 then return false end
  local t = tree:add(probe, tvb())
  t:add(P.opcode, tvb(0, 1)); t:add(P.destqp, tvb(5, 3)); t:add(P.psn, tvb(9, 3))
  local b = 12
  t:add(P.ver, tvb(b, 1)); t:add(P.all, tvb(b, 1))
  if op == 0xC1 then t:add(P.path_hops, tvb(b + 1, 1)); t:add(P.records, tvb(b + 2, 1)) end
  t:add(P.seq, tvb(b + 4, 4)); t:add(P.send_ts, tvb(b + 8, 8))
  if op == 0xC1 then
    for i = 0, tvb(b + 2, 1):uint() - 1 do
      local o = b + 16 + 48 * i
      local r = t:add(P.rec, tvb(o, 48))
      r:add(P.index, tvb(o, 1)); r:add(P.mask, tvb(o + 3, 1)); r:add(P.iport, tvb(o + 4, 4))
      r:add(P.ts, tvb(o + 8, 8)); r:add(P.qlen, tvb(o + 16, 8)); r:add(P.txb, tvb(o + 24, 8))
      r:add(P.rate, tvb(o + 32, 8)); r:add(P.sw, tvb(o + 40, 4)); r:add(P.eport, tvb(o + 44, 4))
    end
  end
  t:add_le(P.icrc, tvb(tvb:len() - 4, 4))
  pinfo.cols.protocol = "RoCEv2/probe"
  return true
end
probe:register_heuristic("udp", probe_heuristic)
