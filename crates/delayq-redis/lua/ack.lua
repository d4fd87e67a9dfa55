-- ack.lua: acknowledges leased jobs: their records are deleted.
-- KEYS[1] lease  ZSET id -> lease deadline ms
-- KEYS[2] jobs   HASH id -> record
-- ARGV: pairs id, token
-- Returns one entry per pair: 1 acked, 0 lease lost (nothing changed).
return ack_pairs(KEYS[2], KEYS[1], ARGV, 1, #ARGV / 2)
