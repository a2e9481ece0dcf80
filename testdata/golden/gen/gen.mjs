// Independent golden-vector generator for NMCR frames.
//
// Written from the wire contract (nomicore-replication-protocol-v1.md, cited as §N) and
// the implementation guide (GUIDE §5 check order, §6 default limits, §7 frame JSON), using
// the lib0 package for every payload encoding (§4). It never imports the Go codec.
//
// `node gen.mjs` (from this directory) writes ../frames.json (frames that must decode and
// encode byte for byte) and ../bad-frames.json (frames that must fail with a given code).
// Output is deterministic: no randomness, no timestamps.

import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const here = (p) => fileURLToPath(new URL(p, import.meta.url))
const LIB0_VERSION = JSON.parse(readFileSync(here('./node_modules/lib0/package.json'), 'utf8')).version
if (LIB0_VERSION !== '0.2.120') throw new Error(`lib0 ${LIB0_VERSION} installed; run npm ci (0.2.120 pinned)`)

// ---------------------------------------------------------------------------------------
// Contract tables

// §5 message registry.
const MESSAGE_TYPES = {
  HELLO: 0x01,
  HELLO_ACK: 0x02,
  GOAWAY: 0x03,
  ERROR: 0x04,
  OPEN_NAMESPACE: 0x10,
  OPEN_OK: 0x11,
  CLOSE_NAMESPACE: 0x12,
  CLOSE_OK: 0x13,
  BOOTSTRAP_SNAPSHOT: 0x20,
  BOOTSTRAP_ACK: 0x21,
  IDENTITY_CHANGED: 0x22,
  SYNC_STEP1: 0x30,
  SYNC_STEP2: 0x31,
  SYNC_APPLIED: 0x32,
  RESYNC_REQUIRED: 0x33,
  UPDATE: 0x40,
  UPDATE_ACK: 0x41,
  UPDATE_CHUNK: 0x42
}

// §6.1 capability bits.
const CAP_CHUNKED_UPDATE = 0x00000001

// §6–§13 payload field tables, in wire order. Encodings (§4):
//   varString, varUint8Array, varUint, u8, bool (u8 0|1), uint32BE (capability bitset),
//   listVarUint (varUint count, then items), optVarString / optVarUint (u8 marker 0|1, then
//   the value when 1), ifVarString / ifVarUint (the UPDATE_CHUNK binding block of §10.3:
//   present with no marker exactly when kind ≠ 0 and chunkIndex = 0).
const FIELDS = {
  HELLO: [
    ['peerInstanceId', 'varString'],
    ['expectedHubInstanceId', 'varString'],
    ['protocolVersions', 'listVarUint'],
    ['requiredCapabilities', 'uint32BE'],
    ['optionalCapabilities', 'uint32BE'],
    ['connectionNonce', 'varUint8Array']
  ],
  HELLO_ACK: [
    ['hubInstanceId', 'varString'],
    ['protocolVersion', 'varUint'],
    ['selectedCapabilities', 'uint32BE'],
    ['connectionNonce', 'varUint8Array'],
    ['connectionId', 'varString']
  ],
  GOAWAY: [
    ['reasonCode', 'varString'],
    ['drainTimeoutMs', 'varUint'],
    ['retryAfterMs', 'optVarUint']
  ],
  ERROR: [
    ['scope', 'u8'],
    ['code', 'varString'],
    ['fatal', 'bool'],
    ['retryable', 'bool'],
    ['relatedSequence', 'optVarUint'],
    ['namespaceId', 'optVarString'],
    ['safeMessage', 'varString']
  ],
  OPEN_NAMESPACE: [
    ['namespaceId', 'varString'],
    ['hasLocalReplica', 'bool'],
    ['replicationId', 'optVarString'],
    ['replicationEpoch', 'optVarUint']
  ],
  OPEN_OK: [
    ['namespaceId', 'varString'],
    ['mode', 'u8'],
    ['replicationId', 'varString'],
    ['replicationEpoch', 'varUint']
  ],
  CLOSE_NAMESPACE: [
    ['namespaceId', 'varString'],
    ['reasonCode', 'varString']
  ],
  CLOSE_OK: [
    ['namespaceId', 'varString'],
    ['ackedSequence', 'varUint']
  ],
  BOOTSTRAP_SNAPSHOT: [
    ['namespaceId', 'varString'],
    ['replicationId', 'varString'],
    ['replicationEpoch', 'varUint'],
    ['snapshot', 'varUint8Array']
  ],
  BOOTSTRAP_ACK: [
    ['namespaceId', 'varString'],
    ['ackedSequence', 'varUint']
  ],
  IDENTITY_CHANGED: [
    ['namespaceId', 'varString'],
    ['replicationId', 'varString'],
    ['replicationEpoch', 'varUint']
  ],
  SYNC_STEP1: [
    ['namespaceId', 'varString'],
    ['syncRoundId', 'varUint'],
    ['stateVector', 'varUint8Array']
  ],
  SYNC_STEP2: [
    ['namespaceId', 'varString'],
    ['syncRoundId', 'varUint'],
    ['relatedStep1Sequence', 'varUint'],
    ['update', 'varUint8Array']
  ],
  SYNC_APPLIED: [
    ['namespaceId', 'varString'],
    ['syncRoundId', 'varUint'],
    ['ackedSequence', 'varUint']
  ],
  RESYNC_REQUIRED: [
    ['namespaceId', 'varString'],
    ['reasonCode', 'varString']
  ],
  UPDATE: [
    ['namespaceId', 'varString'],
    ['update', 'varUint8Array']
  ],
  UPDATE_ACK: [
    ['namespaceId', 'varString'],
    ['ackedSequence', 'varUint']
  ],
  UPDATE_CHUNK: [
    ['kind', 'varUint'],
    ['namespaceId', 'varString'],
    ['transferId', 'varUint'],
    ['chunkIndex', 'varUint'],
    ['chunkCount', 'varUint'],
    ['totalBytes', 'varUint'],
    ['replicationId', 'ifVarString'], // binding block, kind 1
    ['replicationEpoch', 'ifVarUint'], // binding block, kind 1
    ['syncRoundId', 'ifVarUint'], // binding block, kind 2
    ['bytes', 'varUint8Array']
  ]
}

// §13.1 and §13.2 error registries: code → [fatal, retryable column].
const CONNECTION_ERRORS = {
  BAD_MAGIC: ['yes', 'no'],
  UNSUPPORTED_ENVELOPE_VERSION: ['yes', 'no'],
  MALFORMED_FRAME: ['yes', 'no'],
  FRAME_LENGTH_MISMATCH: ['yes', 'no'],
  FRAME_TOO_LARGE: ['yes', 'config'],
  UNSUPPORTED_FLAGS: ['yes', 'no'],
  UNSUPPORTED_MESSAGE_TYPE: ['yes', 'no'],
  SEQUENCE_VIOLATION: ['yes', 'no'],
  HELLO_REQUIRED: ['yes', 'no'],
  HELLO_TIMEOUT: ['yes', 'yes'],
  UNSUPPORTED_PROTOCOL_VERSION: ['yes', 'config'],
  UNSUPPORTED_CAPABILITY: ['yes', 'config'],
  INSTANCE_IDENTITY_MISMATCH: ['yes', 'config'],
  CONNECTION_POLICY_VIOLATION: ['yes', 'config'],
  ACK_STATE_VIOLATION: ['yes', 'no'],
  CONNECTION_BACKPRESSURE: ['yes', 'yes'],
  INTERNAL_ERROR: ['yes', 'yes']
}
const NAMESPACE_ERRORS = {
  TARGET_NOT_REQUESTED: ['yes', 'config'],
  NAMESPACE_REOPEN_REQUIRES_RECONNECT: ['yes', 'reconnect'],
  NAMESPACE_UNAUTHORIZED: ['yes', 'config'],
  NAMESPACE_NOT_FOUND: ['yes', 'config'],
  REPLICATION_NOT_ENABLED: ['yes', 'config'],
  REPLICATION_ID_MISMATCH: ['yes', 'reset'],
  REPLICATION_EPOCH_MISMATCH: ['yes', 'reset'],
  NAMESPACE_STATE_VIOLATION: ['yes', 'no'],
  SYNC_STATE_VIOLATION: ['yes', 'no'],
  BOOTSTRAP_TOO_LARGE: ['yes', 'config'],
  BOOTSTRAP_FAILED: ['yes', 'reconnect'],
  SYNC_DIFF_TOO_LARGE: ['yes', 'config'],
  UPDATE_TOO_LARGE: ['yes', 'config'],
  PROTECTED_FIELD_MUTATION: ['yes', 'no'],
  ROLE_VIOLATION: ['yes', 'no'],
  PERSISTENCE_DEGRADED: ['yes', 'recovery'],
  APPLY_FAILED: ['yes', 'reconnect'],
  ACK_TIMEOUT: ['no', 'resync'],
  NAMESPACE_TIMEOUT: ['yes', 'reconnect'],
  INTERNAL_ERROR: ['yes', 'reconnect'],
  UPDATE_TRANSFER_VIOLATION: ['yes', 'no'],
  UPDATE_TRANSFER_TOO_LARGE: ['yes', 'config'],
  SNAPSHOT_TRANSFER_VIOLATION: ['yes', 'no'],
  SNAPSHOT_TRANSFER_TOO_LARGE: ['yes', 'config'],
  SYNC_TRANSFER_VIOLATION: ['yes', 'no'],
  SYNC_TRANSFER_TOO_LARGE: ['yes', 'config']
}
const REGISTRY = [CONNECTION_ERRORS, NAMESPACE_ERRORS] // indexed by ERROR scope

// The wire bools of a registered code (GUIDE §5: retryable is true exactly when the
// registry's Retryable column is not `no`).
const registered = (scope, code) => {
  const row = REGISTRY[scope][code]
  if (!row) throw new Error(`${code} is not registered in scope ${scope}`)
  return { fatal: row[0] === 'yes', retryable: row[1] !== 'no' }
}

// GUIDE §6 default limits.
const DEFAULT_LIMITS = {
  maxFrameBytes: 512 * 1024 + 1024,
  maxUpdateBytes: 512 * 1024,
  maxSyncDiffBytes: 512 * 1024,
  maxBootstrapBytes: 512 * 1024
}

// ---------------------------------------------------------------------------------------
// Encoding

const MAGIC = [0x4e, 0x4d, 0x43, 0x52] // "NMCR", §3
const HEADER_BYTES = 20
const MAX_UINT32 = 0xffffffff

// Raw stands in for a field's whole encoding, to build malformed payloads
// (non-canonical varUints, invalid UTF-8, bad markers).
class Raw {
  constructor (bytes) { this.bytes = Uint8Array.from(bytes) }
}
const raw = (...parts) => new Raw(parts.flatMap((p) => (typeof p === 'number' ? [p] : [...p])))
// rawVarString writes arbitrary bytes as a varString (length, then the bytes as given).
const rawVarString = (bytes) => raw(enc((e) => encoding.writeVarUint8Array(e, Uint8Array.from(bytes))))

const enc = (f) => {
  const e = encoding.createEncoder()
  f(e)
  return encoding.toUint8Array(e)
}
const fromHex = (h) => Uint8Array.from(Buffer.from(h, 'hex'))
const toHex = (u8) => Buffer.from(u8).toString('hex')
const ascii = (s) => [...Buffer.from(s, 'latin1')]

const writeField = (e, type, value) => {
  if (value instanceof Raw) return encoding.writeUint8Array(e, value.bytes)
  switch (type) {
    case 'varString': case 'ifVarString': return encoding.writeVarString(e, value)
    case 'varUint8Array': return encoding.writeVarUint8Array(e, value)
    case 'varUint': case 'ifVarUint': return encoding.writeVarUint(e, value)
    case 'u8': return encoding.writeUint8(e, value)
    case 'bool': return encoding.writeUint8(e, value === true ? 1 : value === false ? 0 : value)
    case 'uint32BE': return encoding.writeUint32BigEndian(e, value)
    case 'listVarUint':
      encoding.writeVarUint(e, value.length)
      for (const v of value) encoding.writeVarUint(e, v)
      return
    case 'optVarString': case 'optVarUint':
      encoding.writeUint8(e, 1)
      return writeField(e, type === 'optVarString' ? 'varString' : 'varUint', value)
    default: throw new Error(`unknown field encoding ${type}`)
  }
}

// encodePayload writes the fields of `payload` in the order of the contract table.
// It does not judge values: an absent optional is written as marker 0, an absent
// conditional (binding block) field is not written, an absent required field is an error.
// Keys not in the table are refused so a typo cannot silently drop a field.
const encodePayload = (type, payload) => {
  const fields = FIELDS[type]
  for (const k of Object.keys(payload)) {
    if (!fields.some(([name]) => name === k)) throw new Error(`${type}: unknown field ${k}`)
  }
  return enc((e) => {
    for (const [name, ftype] of fields) {
      const v = payload[name]
      if (v === undefined) {
        if (ftype.startsWith('opt')) encoding.writeUint8(e, 0)
        else if (!ftype.startsWith('if')) throw new Error(`${type}: missing field ${name}`)
        continue
      }
      writeField(e, ftype, v)
    }
  })
}

// envelope writes the §3 fixed header and the payload. Every header field can be
// overridden to build envelope-level bad frames.
const envelope = ({ messageType, sequence, payload, magic = MAGIC, envelopeVersion = 1, flags = 0, reserved = 0, payloadLength = payload.length }) =>
  enc((e) => {
    encoding.writeUint8Array(e, Uint8Array.from(magic))
    encoding.writeUint8(e, envelopeVersion)
    encoding.writeUint8(e, messageType)
    encoding.writeUint8(e, (flags >>> 8) & 0xff) // u16 big-endian
    encoding.writeUint8(e, flags & 0xff)
    encoding.writeUint32BigEndian(e, sequence)
    encoding.writeUint32BigEndian(e, payloadLength)
    encoding.writeUint32BigEndian(e, reserved)
    encoding.writeUint8Array(e, payload)
  })

const encodeFrame = ({ type, sequence, payload }) =>
  envelope({ messageType: MESSAGE_TYPES[type], sequence, payload: encodePayload(type, payload) })

// ---------------------------------------------------------------------------------------
// Contract rules for positive vectors (GUIDE §5), so that a vector listed as valid is valid.

const INSTANCE_ID = /^[a-z][a-z0-9-]{0,62}$/
const NAMESPACE_ID = /^ns-[0-9a-f]{32}$/
const REPLICATION_ID = /^[0-9a-f]{32}$/
const SAFE_ASCII = /^[\x20-\x7e]{0,256}$/
const U32_FIELDS = new Set(['syncRoundId', 'transferId', 'chunkIndex', 'chunkCount', 'totalBytes',
  'ackedSequence', 'relatedSequence', 'relatedStep1Sequence'])

const checkRules = (type, p, limits = DEFAULT_LIMITS) => {
  const fail = (why) => { throw new Error(`positive ${type} breaks a rule: ${why}`) }
  for (const [name, ftype] of FIELDS[type]) {
    const v = p[name]
    if (v === undefined) continue
    if (['varUint', 'optVarUint', 'ifVarUint'].includes(ftype) && !(Number.isSafeInteger(v) && v >= 0)) fail(`${name} not a safe integer`)
    if (U32_FIELDS.has(name) && v > MAX_UINT32) fail(`${name} over uint32`)
    if (ftype === 'uint32BE' && !(Number.isInteger(v) && v >= 0 && v <= MAX_UINT32)) fail(name)
    if (ftype === 'bool' && typeof v !== 'boolean') fail(`${name} not a bool`)
    if (/String$/.test(ftype) && typeof v !== 'string') fail(`${name} not a string`)
    if (ftype === 'varUint8Array' && !(v instanceof Uint8Array)) fail(`${name} not bytes`)
  }
  for (const k of ['peerInstanceId', 'expectedHubInstanceId', 'hubInstanceId']) {
    if (k in p && !INSTANCE_ID.test(p[k])) fail(k)
  }
  if ('namespaceId' in p && !NAMESPACE_ID.test(p.namespaceId)) fail('namespaceId')
  if ('replicationId' in p && !REPLICATION_ID.test(p.replicationId)) fail('replicationId')
  if ('replicationEpoch' in p && p.replicationEpoch < 1) fail('replicationEpoch < 1')
  for (const k of ['code', 'reasonCode', 'safeMessage']) {
    if (k in p && !SAFE_ASCII.test(p[k])) fail(`${k} not printable ASCII ≤ 256`)
  }
  if ('connectionId' in p && Buffer.from(p.connectionId, 'utf8').toString('utf8') !== p.connectionId) fail('connectionId')
  switch (type) {
    case 'HELLO': {
      const v = p.protocolVersions
      if (v.length < 1 || v.length > 16) fail('protocolVersions count')
      if (v.some((x, i) => x < 1 || (i > 0 && x >= v[i - 1]))) fail('protocolVersions not strictly descending ≥ 1')
    }
    // fallthrough: both carry the nonce
    case 'HELLO_ACK':
      if (p.connectionNonce.length !== 16) fail('connectionNonce not 16 bytes')
      break
    case 'ERROR': {
      if (p.scope !== 0 && p.scope !== 1) fail('scope')
      if ((p.scope === 1) !== ('namespaceId' in p)) fail('namespaceId present iff scope = 1')
      const row = REGISTRY[p.scope][p.code]
      if (row) {
        const r = registered(p.scope, p.code)
        if (r.fatal !== p.fatal || r.retryable !== p.retryable) fail('fatal/retryable differ from the registry')
      }
      break
    }
    case 'OPEN_NAMESPACE':
      if (('replicationId' in p) !== p.hasLocalReplica || ('replicationEpoch' in p) !== p.hasLocalReplica) {
        fail('identity present iff hasLocalReplica')
      }
      break
    case 'OPEN_OK':
      if (p.mode !== 0 && p.mode !== 1) fail('mode')
      break
    case 'UPDATE':
      if (p.update.length > limits.maxUpdateBytes) fail('update over maxUpdateBytes')
      break
    case 'SYNC_STEP2':
      if (p.update.length > limits.maxSyncDiffBytes) fail('diff over maxSyncDiffBytes')
      break
    case 'BOOTSTRAP_SNAPSHOT':
      if (p.snapshot.length > limits.maxBootstrapBytes) fail('snapshot over maxBootstrapBytes')
      break
    case 'UPDATE_CHUNK': {
      if (![0, 1, 2].includes(p.kind)) fail('kind')
      if (p.transferId < 1) fail('transferId 0')
      if (p.chunkCount < 1 || p.chunkIndex >= p.chunkCount) fail('chunkIndex/chunkCount')
      if (p.bytes.length < 1 || p.bytes.length > p.totalBytes) fail('bytes empty or over totalBytes')
      if (p.bytes.length > limits.maxUpdateBytes) fail('chunk over maxUpdateBytes')
      const first = p.chunkIndex === 0
      if (('replicationId' in p) !== (first && p.kind === 1) || ('replicationEpoch' in p) !== (first && p.kind === 1)) {
        fail('kind 1 binding block present iff chunkIndex = 0')
      }
      if (('syncRoundId' in p) !== (first && p.kind === 2)) fail('kind 2 binding block present iff chunkIndex = 0')
      break
    }
  }
}

// decodePayload reads a payload back with lib0's decoder following the same table, so the
// self-check notices an encoder that writes something other than the table says.
const decodePayload = (type, bytes) => {
  const d = decoding.createDecoder(bytes)
  const out = {}
  for (const [name, ftype] of FIELDS[type]) {
    switch (ftype) {
      case 'varString': out[name] = decoding.readVarString(d); break
      case 'varUint8Array': out[name] = decoding.readVarUint8Array(d); break
      case 'varUint': out[name] = decoding.readVarUint(d); break
      case 'u8': out[name] = decoding.readUint8(d); break
      case 'bool': out[name] = decoding.readUint8(d) === 1; break
      case 'uint32BE': out[name] = decoding.readUint32BigEndian(d); break
      case 'listVarUint': {
        const n = decoding.readVarUint(d)
        out[name] = Array.from({ length: n }, () => decoding.readVarUint(d))
        break
      }
      case 'optVarString': if (decoding.readUint8(d) === 1) out[name] = decoding.readVarString(d); break
      case 'optVarUint': if (decoding.readUint8(d) === 1) out[name] = decoding.readVarUint(d); break
      case 'ifVarString': case 'ifVarUint': {
        const binding = out.chunkIndex === 0 && ((out.kind === 1 && name !== 'syncRoundId') || (out.kind === 2 && name === 'syncRoundId'))
        if (binding) out[name] = ftype === 'ifVarString' ? decoding.readVarString(d) : decoding.readVarUint(d)
        break
      }
    }
  }
  if (d.pos !== bytes.length) throw new Error(`${type}: ${bytes.length - d.pos} bytes left over on re-read`)
  return out
}

// frameJSON is the GUIDE §7 frame JSON: bytes as lowercase hex, absent optionals omitted.
const frameJSON = ({ type, sequence, payload }) => {
  const out = {}
  for (const [name] of FIELDS[type]) {
    const v = payload[name]
    if (v === undefined) continue
    out[name] = v instanceof Uint8Array ? toHex(v) : Array.isArray(v) ? [...v] : v
  }
  return { type, sequence, payload: out }
}

// ---------------------------------------------------------------------------------------
// Realistic values

const NS = 'ns-3f9a1c0e7b2d4a6f8e1c5b9d0a7f3e21'
const NS2 = 'ns-a07c5e19d3b84f62c1e09b7d5a3f8e46'
const RID = '9c4e2a7f1b3d5e8a0c6f4b2d9e1a7c35'
const RID2 = 'e1b7093d5c2a4f8e6b0d3c9a7f1e5b24'
const NONCE = fromHex('5e1f0c3a9b7d4e26a1c8f0b3d2e49a77')
const NONCE2 = fromHex('c03d9a7e51f24b8896e0a4d1b7c35f02')
const MAX_SAFE = Number.MAX_SAFE_INTEGER // 2^53 − 1

// Real Yjs update v1 bytes (opaque to the codec), encoded here with lib0 after the Yjs
// binary format; the same bytes come out of yjs 13.6.33 for the equivalent documents.
//
// yjsTextInsert: one client, one string item inserted at the start of root text `root`.
const yjsTextInsert = (client, root, text) => enc((e) => {
  encoding.writeVarUint(e, 1) // clients with structs
  encoding.writeVarUint(e, 1) // structs of this client
  encoding.writeVarUint(e, client)
  encoding.writeVarUint(e, 0) // first clock
  encoding.writeUint8(e, 4) // info: ContentString, no origins, no parentSub
  encoding.writeVarUint(e, 1) // parent is a root type named by a key
  encoding.writeVarString(e, root)
  encoding.writeVarString(e, text)
  encoding.writeVarUint(e, 0) // empty delete set
})
// yjsMetaSnapshot: the GUIDE §4 `meta` map holding the replication identity.
const yjsMetaSnapshot = (client, replicationId, replicationEpoch) => enc((e) => {
  encoding.writeVarUint(e, 1)
  encoding.writeVarUint(e, 2)
  encoding.writeVarUint(e, client)
  encoding.writeVarUint(e, 0)
  for (const [key, value] of [['replicationId', replicationId], ['replicationEpoch', replicationEpoch]]) {
    encoding.writeUint8(e, 0x28) // info: ContentAny with parentSub
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 'meta')
    encoding.writeVarString(e, key)
    encoding.writeVarUint(e, 1) // one value
    encoding.writeAny(e, value)
  }
  encoding.writeVarUint(e, 0)
})
// A state vector: client → next clock.
const yjsStateVector = (entries) => enc((e) => {
  encoding.writeVarUint(e, entries.length)
  for (const [client, clock] of entries) {
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, clock)
  }
})

const UPDATE_HI = yjsTextInsert(1, 't', 'hi') // 010101000401017402686900
const UPDATE_EMPTY = fromHex('0000') // Yjs encoding of an update with no structs and no deletes
const SV_HI = yjsStateVector([[1, 2]])
const SV_EMPTY = yjsStateVector([])
const SNAPSHOT = yjsMetaSnapshot(2, RID, 1)
// A larger update split into chunks: 40 characters inserted by client 7 (54 bytes).
const BIG = yjsTextInsert(7, 't', 'x'.repeat(40))
const BIG_A = BIG.subarray(0, 27)
const BIG_B = BIG.subarray(27)
const SNAPSHOT_A = SNAPSHOT.subarray(0, 48)
const SNAPSHOT_B = SNAPSHOT.subarray(48)
const UPDATE_HI_A = UPDATE_HI.subarray(0, 6)
const UPDATE_HI_B = UPDATE_HI.subarray(6)

const LONG_ID = ('peer-' + '0123456789abcdef-'.repeat(4)).slice(0, 63) // 63 characters, the longest instance id
const CONNECTION_ID_LONG = 'conn-' + Array.from({ length: 9 }, (_, i) => `${RID}`.slice(i, i + 16)).join('-') // > 127 bytes
const REASON_256 = ('operator requested removal of target; drain in progress (ticket OPS-4821): ' +
  'see runbook section 7.3 "namespace close" for the manual steps ~ [a-z] {0,62} | & * % $ # @ ! ? + = _ ^ ` \\ / < > , . ; : \' "' +
  ' retry after the maintenance window closes. [end of 256]')
if (REASON_256.length !== 256) throw new Error(`REASON_256 is ${REASON_256.length} bytes`)

// ---------------------------------------------------------------------------------------
// Positive vectors

const positives = []
const ok = (name, frame, { chunked = false, decodeOnly = false } = {}) => {
  positives.push({ name, chunked, decodeOnly, frame })
}
const err = (scope, code, rest) => ({ scope, code, ...registered(scope, code), ...rest })

// §6.1 HELLO
ok('HELLO-v1-generation', { type: 'HELLO', sequence: 1, payload: {
  peerInstanceId: 'peer-a', expectedHubInstanceId: 'hub', protocolVersions: [1],
  requiredCapabilities: 0, optionalCapabilities: 0, connectionNonce: NONCE } })
ok('HELLO-chunked-capability-three-versions', { type: 'HELLO', sequence: 1, payload: {
  peerInstanceId: 'peer-eu-west-2', expectedHubInstanceId: 'hub-eu', protocolVersions: [3, 2, 1],
  requiredCapabilities: 0, optionalCapabilities: CAP_CHUNKED_UPDATE, connectionNonce: NONCE2 } })
ok('HELLO-sixteen-versions-63-char-id', { type: 'HELLO', sequence: 1, payload: {
  peerInstanceId: LONG_ID, expectedHubInstanceId: 'h', protocolVersions: [200, 150, 129, 128, 127, 64, 32, 16, 9, 8, 6, 5, 4, 3, 2, 1],
  requiredCapabilities: 0, optionalCapabilities: CAP_CHUNKED_UPDATE, connectionNonce: NONCE } })

// §6.2 HELLO_ACK
ok('HELLO_ACK-v1-generation', { type: 'HELLO_ACK', sequence: 1, payload: {
  hubInstanceId: 'hub', protocolVersion: 1, selectedCapabilities: 0, connectionNonce: NONCE, connectionId: 'c-0001' } })
ok('HELLO_ACK-chunked-long-connection-id', { type: 'HELLO_ACK', sequence: 1, payload: {
  hubInstanceId: 'hub-eu', protocolVersion: 1, selectedCapabilities: CAP_CHUNKED_UPDATE, connectionNonce: NONCE2,
  connectionId: CONNECTION_ID_LONG } })

// §6.3 GOAWAY
ok('GOAWAY-no-retry-after', { type: 'GOAWAY', sequence: 57, payload: {
  reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: 30000 } })
ok('GOAWAY-retry-after', { type: 'GOAWAY', sequence: 12, payload: {
  reasonCode: 'REAUTH_REQUIRED', drainTimeoutMs: 5000, retryAfterMs: 15000 } })
ok('GOAWAY-retry-after-zero', { type: 'GOAWAY', sequence: 2, payload: {
  reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: 0, retryAfterMs: 0 } })

// §13 ERROR
ok('ERROR-connection', { type: 'ERROR', sequence: 2, payload: err(0, 'HELLO_TIMEOUT', {
  safeMessage: 'HELLO not received in time' }) })
ok('ERROR-connection-related-sequence', { type: 'ERROR', sequence: 9, payload: err(0, 'MALFORMED_FRAME', {
  relatedSequence: 300, safeMessage: 'malformed frame' }) })
ok('ERROR-connection-config-retryable', { type: 'ERROR', sequence: 2, payload: err(0, 'UNSUPPORTED_PROTOCOL_VERSION', {
  relatedSequence: 1, safeMessage: 'no common protocol version' }) })
ok('ERROR-namespace', { type: 'ERROR', sequence: 4, payload: err(1, 'NAMESPACE_NOT_FOUND', {
  relatedSequence: 3, namespaceId: NS, safeMessage: 'namespace not found' }) })
ok('ERROR-namespace-not-fatal', { type: 'ERROR', sequence: 88, payload: err(1, 'ACK_TIMEOUT', {
  namespaceId: NS2, safeMessage: 'update acknowledgement timed out' }) })
ok('ERROR-namespace-not-retryable', { type: 'ERROR', sequence: 17, payload: err(1, 'PROTECTED_FIELD_MUTATION', {
  relatedSequence: 16, namespaceId: NS, safeMessage: 'update touches protected fields' }) })
ok('ERROR-namespace-unknown-code', { type: 'ERROR', sequence: 5, payload: {
  scope: 1, code: 'FUTURE_NAMESPACE_CODE', fatal: true, retryable: false, namespaceId: NS, safeMessage: 'unregistered code' } },
{ decodeOnly: true })

// §7 namespace open
ok('OPEN_NAMESPACE-bootstrap', { type: 'OPEN_NAMESPACE', sequence: 2, payload: {
  namespaceId: NS, hasLocalReplica: false } })
ok('OPEN_NAMESPACE-reconcile', { type: 'OPEN_NAMESPACE', sequence: 3, payload: {
  namespaceId: NS2, hasLocalReplica: true, replicationId: RID2, replicationEpoch: 3 } })
ok('OPEN_OK-bootstrap', { type: 'OPEN_OK', sequence: 2, payload: {
  namespaceId: NS, mode: 0, replicationId: RID, replicationEpoch: 1 } })
ok('OPEN_OK-reconcile', { type: 'OPEN_OK', sequence: 3, payload: {
  namespaceId: NS2, mode: 1, replicationId: RID2, replicationEpoch: 3 } })

// §12 namespace close
ok('CLOSE_NAMESPACE', { type: 'CLOSE_NAMESPACE', sequence: 40, payload: {
  namespaceId: NS, reasonCode: 'target-removed' } })
ok('CLOSE_NAMESPACE-reason-256-bytes', { type: 'CLOSE_NAMESPACE', sequence: 41, payload: {
  namespaceId: NS2, reasonCode: REASON_256 } })
ok('CLOSE_OK', { type: 'CLOSE_OK', sequence: 33, payload: { namespaceId: NS, ackedSequence: 40 } })

// §8 bootstrap
ok('BOOTSTRAP_SNAPSHOT', { type: 'BOOTSTRAP_SNAPSHOT', sequence: 3, payload: {
  namespaceId: NS, replicationId: RID, replicationEpoch: 1, snapshot: SNAPSHOT } })
ok('BOOTSTRAP_ACK', { type: 'BOOTSTRAP_ACK', sequence: 3, payload: { namespaceId: NS, ackedSequence: 3 } })

// §11 identity fencing
ok('IDENTITY_CHANGED', { type: 'IDENTITY_CHANGED', sequence: 120, payload: {
  namespaceId: NS2, replicationId: RID2, replicationEpoch: 4 } })
ok('IDENTITY_CHANGED-max-safe-epoch', { type: 'IDENTITY_CHANGED', sequence: 121, payload: {
  namespaceId: NS, replicationId: RID, replicationEpoch: MAX_SAFE } })

// §9 reconciliation
ok('SYNC_STEP1', { type: 'SYNC_STEP1', sequence: 4, payload: { namespaceId: NS, syncRoundId: 1, stateVector: SV_HI } })
ok('SYNC_STEP1-empty-state-vector', { type: 'SYNC_STEP1', sequence: 4, payload: {
  namespaceId: NS2, syncRoundId: 200, stateVector: SV_EMPTY } })
ok('SYNC_STEP2', { type: 'SYNC_STEP2', sequence: 5, payload: {
  namespaceId: NS, syncRoundId: 1, relatedStep1Sequence: 4, update: UPDATE_HI } })
ok('SYNC_STEP2-empty-diff', { type: 'SYNC_STEP2', sequence: 6, payload: {
  namespaceId: NS2, syncRoundId: 200, relatedStep1Sequence: 5, update: UPDATE_EMPTY } })
ok('SYNC_STEP2-zero-length-diff', { type: 'SYNC_STEP2', sequence: 7, payload: {
  namespaceId: NS2, syncRoundId: 201, relatedStep1Sequence: 300, update: new Uint8Array(0) } })
ok('SYNC_APPLIED', { type: 'SYNC_APPLIED', sequence: 6, payload: { namespaceId: NS, syncRoundId: 1, ackedSequence: 5 } })
ok('SYNC_APPLIED-max-uint32-round', { type: 'SYNC_APPLIED', sequence: 70000, payload: {
  namespaceId: NS2, syncRoundId: MAX_UINT32, ackedSequence: 69999 } })
ok('RESYNC_REQUIRED-send-queue-overflow', { type: 'RESYNC_REQUIRED', sequence: 301, payload: {
  namespaceId: NS, reasonCode: 'send-queue-overflow' } })
ok('RESYNC_REQUIRED-update-transfer-expired', { type: 'RESYNC_REQUIRED', sequence: 302, payload: {
  namespaceId: NS2, reasonCode: 'UPDATE_TRANSFER_EXPIRED' } })

// §10 live updates
ok('UPDATE', { type: 'UPDATE', sequence: 300, payload: { namespaceId: NS, update: UPDATE_HI } })
ok('UPDATE-empty-update', { type: 'UPDATE', sequence: 301, payload: { namespaceId: NS, update: new Uint8Array(0) } })
ok('UPDATE_ACK', { type: 'UPDATE_ACK', sequence: 18, payload: { namespaceId: NS, ackedSequence: 300 } })
ok('UPDATE_ACK-max-uint32', { type: 'UPDATE_ACK', sequence: MAX_UINT32, payload: { namespaceId: NS2, ackedSequence: MAX_UINT32 } })

// §10.3 UPDATE_CHUNK (chunked: the decoder has CAP_CHUNKED_UPDATE negotiated)
const chunk = (name, sequence, payload) => ok(name, { type: 'UPDATE_CHUNK', sequence, payload }, { chunked: true })
chunk('UPDATE_CHUNK-kind0-first', 310, {
  kind: 0, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: BIG.length, bytes: BIG_A })
chunk('UPDATE_CHUNK-kind0-next', 311, {
  kind: 0, namespaceId: NS, transferId: 1, chunkIndex: 1, chunkCount: 2, totalBytes: BIG.length, bytes: BIG_B })
chunk('UPDATE_CHUNK-kind0-single', 312, {
  kind: 0, namespaceId: NS2, transferId: 2, chunkIndex: 0, chunkCount: 1, totalBytes: UPDATE_HI.length, bytes: UPDATE_HI })
chunk('UPDATE_CHUNK-kind0-large-totals', 1000, {
  kind: 0, namespaceId: NS, transferId: 300, chunkIndex: 63, chunkCount: 64, totalBytes: 70000, bytes: UPDATE_HI_B })
chunk('UPDATE_CHUNK-kind1-first-binding', 3, {
  kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: SNAPSHOT.length,
  replicationId: RID, replicationEpoch: 1, bytes: SNAPSHOT_A })
chunk('UPDATE_CHUNK-kind1-next', 4, {
  kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 1, chunkCount: 2, totalBytes: SNAPSHOT.length, bytes: SNAPSHOT_B })
chunk('UPDATE_CHUNK-kind2-first-binding', 9, {
  kind: 2, namespaceId: NS2, transferId: 3, chunkIndex: 0, chunkCount: 2, totalBytes: UPDATE_HI.length,
  syncRoundId: 300, bytes: UPDATE_HI_A })
chunk('UPDATE_CHUNK-kind2-next', 10, {
  kind: 2, namespaceId: NS2, transferId: 3, chunkIndex: 1, chunkCount: 2, totalBytes: UPDATE_HI.length, bytes: UPDATE_HI_B })

// ---------------------------------------------------------------------------------------
// Negative vectors. Each expected code is read off GUIDE §5's check order and the contract
// rules named in its note; none is computed by a decoder.

const bad = []
const CHECK_ORDER_ENVELOPE = new Set(['MALFORMED_FRAME', 'BAD_MAGIC', 'UNSUPPORTED_ENVELOPE_VERSION', 'UNSUPPORTED_FLAGS',
  'UNSUPPORTED_MESSAGE_TYPE', 'FRAME_TOO_LARGE', 'FRAME_LENGTH_MISMATCH'])
const PAYLOAD_CODES = new Set(['MALFORMED_FRAME', 'UPDATE_TOO_LARGE', 'SYNC_DIFF_TOO_LARGE', 'BOOTSTRAP_TOO_LARGE'])

// badFrame: a frame that must fail at the envelope stage (GUIDE §5 checks 1–8).
const badFrame = (name, bytes, error, note, { chunked = false, limits = {} } = {}) => {
  if (!CHECK_ORDER_ENVELOPE.has(error)) throw new Error(`${name}: ${error} is not an envelope-stage code`)
  bad.push({ name, stage: 'envelope', bytes, chunked, limits: { ...DEFAULT_LIMITS, ...limits }, error, note })
}
// badPayload: a clean envelope (checks 1–8 pass) around a payload that must fail check 10.
const badPayload = (name, type, payload, error, note, { chunked = type === 'UPDATE_CHUNK', limits = {}, sequence = 7 } = {}) => {
  if (!PAYLOAD_CODES.has(error)) throw new Error(`${name}: ${error} is not a payload-stage code`)
  const p = payload instanceof Uint8Array ? payload : encodePayload(type, payload)
  const bytes = envelope({ messageType: MESSAGE_TYPES[type], sequence, payload: p })
  bad.push({ name, stage: 'payload', bytes, chunked, limits: { ...DEFAULT_LIMITS, ...limits }, error, note })
}

const UPDATE_ACK_PAYLOAD = encodePayload('UPDATE_ACK', { namespaceId: NS, ackedSequence: 300 })
const goodUpdateAck = (over = {}) => envelope({ messageType: MESSAGE_TYPES.UPDATE_ACK, sequence: 18, payload: UPDATE_ACK_PAYLOAD, ...over })
const HELLO_OK = { peerInstanceId: 'peer-a', expectedHubInstanceId: 'hub', protocolVersions: [1],
  requiredCapabilities: 0, optionalCapabilities: 0, connectionNonce: NONCE }
const HELLO_ACK_OK = { hubInstanceId: 'hub', protocolVersion: 1, selectedCapabilities: 0, connectionNonce: NONCE, connectionId: 'c-0001' }
const CHUNK_OK = { kind: 0, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: BIG.length, bytes: BIG_A }
const CHUNK_OK_PAYLOAD = encodePayload('UPDATE_CHUNK', CHUNK_OK)

// --- GUIDE §5 checks 1–8: the envelope
badFrame('short-empty-message', new Uint8Array(0), 'MALFORMED_FRAME', 'check 2: 0 bytes is shorter than the 20-byte header')
badFrame('short-19-bytes', goodUpdateAck().subarray(0, 19), 'MALFORMED_FRAME', 'check 2: 19 bytes, one short of the 20-byte header')
badFrame('short-4-bytes-bad-magic', fromHex('deadbeef'), 'MALFORMED_FRAME', 'check 2 comes before check 3: a 4-byte message with a wrong magic is still too short')
badFrame('bad-magic', goodUpdateAck({ magic: ascii('NMCQ') }), 'BAD_MAGIC', 'check 3: magic is "NMCQ", not "NMCR" (§3)')
badFrame('bad-magic-lowercase', goodUpdateAck({ magic: ascii('nmcr') }), 'BAD_MAGIC', 'check 3: magic is "nmcr"; the magic is exactly 4e 4d 43 52 (§3)')
badFrame('bad-magic-and-version-2', goodUpdateAck({ magic: ascii('XMCR'), envelopeVersion: 2 }), 'BAD_MAGIC', 'check 3 comes before check 4')
badFrame('envelope-version-2', goodUpdateAck({ envelopeVersion: 2 }), 'UNSUPPORTED_ENVELOPE_VERSION', 'check 4: envelopeVersion 2; v1 accepts only 1 (§3)')
badFrame('envelope-version-0', goodUpdateAck({ envelopeVersion: 0 }), 'UNSUPPORTED_ENVELOPE_VERSION', 'check 4: envelopeVersion 0')
badFrame('envelope-version-2-and-flags', goodUpdateAck({ envelopeVersion: 2, flags: 1 }), 'UNSUPPORTED_ENVELOPE_VERSION', 'check 4 comes before check 5')
badFrame('flags-low-bit', goodUpdateAck({ flags: 0x0001 }), 'UNSUPPORTED_FLAGS', 'check 5: flags 0x0001; v1 flags must be 0 (§3, §5)')
badFrame('flags-high-bit', goodUpdateAck({ flags: 0x8000 }), 'UNSUPPORTED_FLAGS', 'check 5: flags 0x8000 (the high byte of the big-endian u16)')
badFrame('flags-and-reserved', goodUpdateAck({ flags: 2, reserved: 1 }), 'UNSUPPORTED_FLAGS', 'check 5 comes before check 6')
badFrame('reserved-nonzero', goodUpdateAck({ reserved: 1 }), 'MALFORMED_FRAME', 'check 6: reserved must be 0 (§3)')
badFrame('reserved-high-byte', goodUpdateAck({ reserved: 0x80000000 }), 'MALFORMED_FRAME', 'check 6: reserved 0x80000000')
badFrame('reserved-and-unknown-type', goodUpdateAck({ reserved: 1, messageType: 0x7f }), 'MALFORMED_FRAME', 'check 6 comes before check 7')
for (const t of [0x00, 0x05, 0x14, 0x23, 0x34, 0x43, 0x7f, 0xff]) {
  const h = t.toString(16).padStart(2, '0')
  badFrame(`unknown-message-type-0x${h}`, goodUpdateAck({ messageType: t }), 'UNSUPPORTED_MESSAGE_TYPE',
    `check 7: 0x${h} is not in the §5 message registry (the UPDATE_ACK payload after it is never read)`)
}
badFrame('unknown-message-type-0x05-chunked', goodUpdateAck({ messageType: 0x05 }), 'UNSUPPORTED_MESSAGE_TYPE',
  'check 7: 0x05 stays unknown when CAP_CHUNKED_UPDATE is negotiated', { chunked: true })
badFrame('update-chunk-not-negotiated', envelope({ messageType: 0x42, sequence: 310, payload: CHUNK_OK_PAYLOAD }),
  'UNSUPPORTED_MESSAGE_TYPE', 'check 7: a well-formed 0x42 without CAP_CHUNKED_UPDATE negotiated (§5, §10.3)')
badFrame('update-chunk-not-negotiated-garbage-payload', envelope({ messageType: 0x42, sequence: 310, payload: fromHex('ff'.repeat(5)) }),
  'UNSUPPORTED_MESSAGE_TYPE', 'check 7: 0x42 without CAP_CHUNKED_UPDATE is refused before the payload is parsed (§10.3)')
badFrame('unknown-type-and-length-mismatch', goodUpdateAck({ messageType: 0x05, payloadLength: UPDATE_ACK_PAYLOAD.length + 9 }),
  'UNSUPPORTED_MESSAGE_TYPE', 'check 7 comes before check 8')
badFrame('payload-length-one-short', goodUpdateAck({ payloadLength: UPDATE_ACK_PAYLOAD.length - 1 }), 'FRAME_LENGTH_MISMATCH',
  'check 8: payloadLength is one less than the bytes after the header (§3: byteLength must equal 20 + payloadLength)')
badFrame('payload-length-one-long', goodUpdateAck({ payloadLength: UPDATE_ACK_PAYLOAD.length + 1 }), 'FRAME_LENGTH_MISMATCH',
  'check 8: payloadLength is one more than the bytes after the header')
badFrame('payload-length-zero-with-body', goodUpdateAck({ payloadLength: 0 }), 'FRAME_LENGTH_MISMATCH',
  'check 8: payloadLength 0 but a payload follows')
badFrame('header-only-payload-length-nonzero', goodUpdateAck().subarray(0, 20), 'FRAME_LENGTH_MISMATCH',
  'check 8: a bare 20-byte header that announces a payload')
badFrame('payload-length-huge', goodUpdateAck({ payloadLength: 0xfffffff0 }), 'FRAME_TOO_LARGE',
  'check 8: 20 + 0xFFFFFFF0 > maxFrameBytes, on a short body (nothing may be allocated from it)')
badFrame('payload-length-max-uint32', goodUpdateAck({ payloadLength: MAX_UINT32 }), 'FRAME_TOO_LARGE',
  'check 8: 20 + 0xFFFFFFFF exceeds maxFrameBytes (the sum must not wrap in 32 bits)')
badFrame('payload-length-one-over-max-frame', goodUpdateAck({ payloadLength: DEFAULT_LIMITS.maxFrameBytes - HEADER_BYTES + 1 }), 'FRAME_TOO_LARGE',
  'check 8: 20 + payloadLength = maxFrameBytes + 1, on a short body')
{
  const longUpdate = envelope({ messageType: MESSAGE_TYPES.UPDATE, sequence: 300, payload: encodePayload('UPDATE', { namespaceId: NS, update: BIG }) })
  badFrame('message-over-max-frame-bytes', longUpdate, 'FRAME_TOO_LARGE',
    `check 1: a well-formed ${longUpdate.length}-byte UPDATE frame with maxFrameBytes 64`, { limits: { maxFrameBytes: 64 } })
  const badMagicLong = longUpdate.slice()
  badMagicLong[0] = 0x00
  badFrame('message-over-max-frame-bytes-bad-magic', badMagicLong, 'FRAME_TOO_LARGE',
    'check 1 comes before check 3: the frame is over maxFrameBytes 64 and has a bad magic', { limits: { maxFrameBytes: 64 } })
  badFrame('message-over-max-frame-bytes-short-length', envelope({ messageType: MESSAGE_TYPES.UPDATE, sequence: 300,
    payload: encodePayload('UPDATE', { namespaceId: NS, update: BIG }), payloadLength: 4 }), 'FRAME_TOO_LARGE',
  'check 1 comes before check 8: the message is over maxFrameBytes 64 even though payloadLength claims 4', { limits: { maxFrameBytes: 64 } })
}

// --- GUIDE §5 check 10: payload structure (§4)
const helloBytes = encodePayload('HELLO', HELLO_OK)
badPayload('truncated-mid-nonce', 'HELLO', helloBytes.subarray(0, helloBytes.length - 5), 'MALFORMED_FRAME',
  'HELLO cut 5 bytes into connectionNonce; payloadLength matches the shortened payload (§4 truncation)')
badPayload('truncated-mid-namespace-id', 'UPDATE_ACK', UPDATE_ACK_PAYLOAD.subarray(0, 10), 'MALFORMED_FRAME',
  'UPDATE_ACK ends inside the namespaceId string')
badPayload('truncated-missing-last-field', 'UPDATE_ACK', UPDATE_ACK_PAYLOAD.subarray(0, 36), 'MALFORMED_FRAME',
  'UPDATE_ACK ends after namespaceId: ackedSequence is missing')
badPayload('empty-payload', 'UPDATE_ACK', new Uint8Array(0), 'MALFORMED_FRAME', 'UPDATE_ACK with payloadLength 0')
badPayload('trailing-byte', 'UPDATE_ACK', Uint8Array.from([...UPDATE_ACK_PAYLOAD, 0x00]), 'MALFORMED_FRAME',
  'a valid UPDATE_ACK payload followed by one 0x00 byte (§4: no undeclared trailing bytes)')
badPayload('trailing-byte-after-absent-optional', 'GOAWAY', Uint8Array.from([...encodePayload('GOAWAY', {
  reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: 30000 }), 0x01]), 'MALFORMED_FRAME',
'GOAWAY with retryAfterMs marker 0, then a stray 0x01')
badPayload('varuint-trailing-continuation', 'UPDATE_ACK', Uint8Array.from([...UPDATE_ACK_PAYLOAD.subarray(0, 36), 0xac]), 'MALFORMED_FRAME',
  'ackedSequence ends on a byte with the continuation bit set (truncated varUint)')
badPayload('noncanonical-varuint-zero', 'CLOSE_OK', { namespaceId: NS, ackedSequence: raw(0x80, 0x00) }, 'MALFORMED_FRAME',
  'ackedSequence written 80 00 instead of 00 (§4: shortest varUint only)')
badPayload('noncanonical-varuint-five', 'UPDATE_ACK', { namespaceId: NS, ackedSequence: raw(0x85, 0x80, 0x00) }, 'MALFORMED_FRAME',
  'ackedSequence 5 written 85 80 00')
badPayload('noncanonical-string-length', 'UPDATE_ACK', { namespaceId: raw(0xa3, 0x00, ascii(NS)), ackedSequence: 300 }, 'MALFORMED_FRAME',
  'namespaceId length 35 written a3 00 instead of 23')
badPayload('varuint-over-safe-integer', 'GOAWAY', { reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: 2 ** 53 }, 'MALFORMED_FRAME',
  'drainTimeoutMs = 2^53, one over the largest safe integer (GUIDE §5)')
badPayload('varuint-ten-bytes', 'GOAWAY', { reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: raw(fromHex('ffffffffffffffffff01')) }, 'MALFORMED_FRAME',
  'drainTimeoutMs is a 10-byte varUint (2^64 − 1): overflow')
badPayload('acked-sequence-over-uint32', 'UPDATE_ACK', { namespaceId: NS, ackedSequence: 2 ** 32 }, 'MALFORMED_FRAME',
  'ackedSequence 2^32 is not a uint32 sequence value (GUIDE §5)')
badPayload('related-sequence-over-uint32', 'ERROR', err(0, 'MALFORMED_FRAME', { relatedSequence: 2 ** 32, safeMessage: 'malformed frame' }),
  'MALFORMED_FRAME', 'ERROR relatedSequence 2^32 is not a uint32 sequence value')
badPayload('sync-round-id-over-uint32', 'SYNC_STEP1', { namespaceId: NS, syncRoundId: 2 ** 32, stateVector: SV_HI }, 'MALFORMED_FRAME',
  'syncRoundId 2^32 (§9.1: uint32)')
badPayload('replication-epoch-over-safe-integer', 'IDENTITY_CHANGED', { namespaceId: NS, replicationId: RID, replicationEpoch: 2 ** 53 },
  'MALFORMED_FRAME', 'replicationEpoch 2^53 is not a safe integer (§1)')
badPayload('bytes-length-past-end', 'UPDATE', { namespaceId: NS, update: raw(0x20, UPDATE_HI) }, 'MALFORMED_FRAME',
  'update claims 32 bytes but 12 remain')
badPayload('bytes-length-huge', 'SYNC_STEP1', { namespaceId: NS, syncRoundId: 1, stateVector: raw(0xff, 0xff, 0xff, 0xff, 0x0f, SV_HI) }, 'MALFORMED_FRAME',
  'stateVector (no size cap of its own) claims 2^32 − 1 bytes with 3 remaining: rejected without allocating')

// Strings (GUIDE §5)
badPayload('invalid-utf8-byte-ff', 'HELLO_ACK', { ...HELLO_ACK_OK, connectionId: rawVarString([...ascii('c-'), 0xff, ...ascii('01')]) }, 'MALFORMED_FRAME',
  'connectionId contains the byte 0xff (not UTF-8)')
badPayload('invalid-utf8-overlong', 'HELLO_ACK', { ...HELLO_ACK_OK, connectionId: rawVarString([...ascii('c-'), 0xc0, 0xaf]) }, 'MALFORMED_FRAME',
  'connectionId contains c0 af, an overlong encoding of "/"')
badPayload('invalid-utf8-surrogate', 'HELLO_ACK', { ...HELLO_ACK_OK, connectionId: rawVarString([...ascii('c-'), 0xed, 0xa0, 0x80]) }, 'MALFORMED_FRAME',
  'connectionId contains ed a0 80, an encoded UTF-16 surrogate')
badPayload('invalid-utf8-truncated-sequence', 'HELLO_ACK', { ...HELLO_ACK_OK, connectionId: rawVarString([...ascii('c-'), 0xe2, 0x82]) }, 'MALFORMED_FRAME',
  'connectionId ends inside a 3-byte UTF-8 sequence')
badPayload('namespace-id-31-hex', 'UPDATE_ACK', { namespaceId: NS.slice(0, -1), ackedSequence: 300 }, 'MALFORMED_FRAME',
  'namespaceId "ns-" + 31 hex (§4: ^ns-[0-9a-f]{32}$)')
badPayload('namespace-id-33-hex', 'UPDATE_ACK', { namespaceId: NS + 'a', ackedSequence: 300 }, 'MALFORMED_FRAME', 'namespaceId "ns-" + 33 hex')
badPayload('namespace-id-uppercase-hex', 'UPDATE_ACK', { namespaceId: NS.toUpperCase().replace('NS-', 'ns-'), ackedSequence: 300 }, 'MALFORMED_FRAME',
  'namespaceId with uppercase hex digits')
badPayload('namespace-id-uppercase-prefix', 'UPDATE_ACK', { namespaceId: 'NS-' + NS.slice(3), ackedSequence: 300 }, 'MALFORMED_FRAME',
  'namespaceId with prefix "NS-"')
badPayload('namespace-id-non-hex', 'UPDATE', { namespaceId: NS.slice(0, -1) + 'g', update: UPDATE_HI }, 'MALFORMED_FRAME',
  'namespaceId ends in "g"')
badPayload('namespace-id-empty', 'RESYNC_REQUIRED', { namespaceId: '', reasonCode: 'send-queue-overflow' }, 'MALFORMED_FRAME', 'empty namespaceId')
badPayload('instance-id-leading-digit', 'HELLO', { ...HELLO_OK, peerInstanceId: '1peer' }, 'MALFORMED_FRAME',
  'peerInstanceId starts with a digit (§6.1: ^[a-z][a-z0-9-]{0,62}$)')
badPayload('instance-id-64-chars', 'HELLO', { ...HELLO_OK, peerInstanceId: LONG_ID + 'x' }, 'MALFORMED_FRAME', 'peerInstanceId of 64 characters')
badPayload('instance-id-empty', 'HELLO', { ...HELLO_OK, expectedHubInstanceId: '' }, 'MALFORMED_FRAME', 'empty expectedHubInstanceId')
badPayload('instance-id-uppercase', 'HELLO', { ...HELLO_OK, expectedHubInstanceId: 'Hub' }, 'MALFORMED_FRAME', 'expectedHubInstanceId "Hub"')
badPayload('instance-id-underscore', 'HELLO_ACK', { ...HELLO_ACK_OK, hubInstanceId: 'hub_1' }, 'MALFORMED_FRAME', 'hubInstanceId "hub_1"')
badPayload('replication-id-uppercase', 'IDENTITY_CHANGED', { namespaceId: NS, replicationId: RID.toUpperCase(), replicationEpoch: 2 },
  'MALFORMED_FRAME', 'replicationId in uppercase hex (§1: 32 lowercase hex)')
badPayload('replication-id-31-hex', 'BOOTSTRAP_SNAPSHOT', { namespaceId: NS, replicationId: RID.slice(1), replicationEpoch: 1, snapshot: SNAPSHOT },
  'MALFORMED_FRAME', 'replicationId of 31 hex digits')
badPayload('safe-message-non-ascii', 'ERROR', err(0, 'INTERNAL_ERROR', { safeMessage: 'intern\u00e9 error' }), 'MALFORMED_FRAME',
  'safeMessage holds "é" (valid UTF-8, not printable ASCII)')
badPayload('safe-message-newline', 'ERROR', err(0, 'INTERNAL_ERROR', { safeMessage: 'internal\nerror' }), 'MALFORMED_FRAME',
  'safeMessage holds a line feed (not printable ASCII)')
badPayload('safe-message-257-bytes', 'ERROR', err(0, 'INTERNAL_ERROR', { safeMessage: 'x'.repeat(257) }), 'MALFORMED_FRAME',
  'safeMessage of 257 bytes (GUIDE §5: at most 256)')
badPayload('reason-code-257-bytes', 'CLOSE_NAMESPACE', { namespaceId: NS, reasonCode: REASON_256 + '.' }, 'MALFORMED_FRAME',
  'reasonCode of 257 bytes')
badPayload('reason-code-control-char', 'RESYNC_REQUIRED', { namespaceId: NS, reasonCode: 'send-queue-overflow\u0000' }, 'MALFORMED_FRAME',
  'reasonCode ends in a NUL byte')
badPayload('error-code-del-char', 'ERROR', { scope: 0, code: 'FUTURE\u007f', fatal: true, retryable: false, safeMessage: 'x' }, 'MALFORMED_FRAME',
  'code holds DEL (0x7f), not printable ASCII')

// Markers and bools (§4)
badPayload('optional-marker-2', 'GOAWAY', { reasonCode: 'SERVER_SHUTTING_DOWN', drainTimeoutMs: 30000, retryAfterMs: raw(0x02, 0x05) }, 'MALFORMED_FRAME',
  'retryAfterMs optional marker is 2 (§4: u8 0|1)')
badPayload('optional-marker-ff', 'ERROR', { ...err(0, 'INTERNAL_ERROR', { safeMessage: 'x' }), relatedSequence: raw(0xff, 0x05) }, 'MALFORMED_FRAME',
  'relatedSequence optional marker is 0xff')
badPayload('bool-2', 'OPEN_NAMESPACE', { namespaceId: NS, hasLocalReplica: 2 }, 'MALFORMED_FRAME', 'hasLocalReplica byte is 2 (§4: bool u8 0|1)')
badPayload('bool-fatal-ff', 'ERROR', { ...err(0, 'INTERNAL_ERROR', { safeMessage: 'x' }), fatal: 0xff }, 'MALFORMED_FRAME', 'ERROR fatal byte is 0xff')

// §6.1 HELLO rules
badPayload('hello-no-versions', 'HELLO', { ...HELLO_OK, protocolVersions: [] }, 'MALFORMED_FRAME', 'protocolVersions is empty (§6.1: at least one)')
badPayload('hello-versions-ascending', 'HELLO', { ...HELLO_OK, protocolVersions: [1, 2] }, 'MALFORMED_FRAME', 'protocolVersions [1,2] is ascending (§6.1: descending)')
badPayload('hello-versions-duplicate', 'HELLO', { ...HELLO_OK, protocolVersions: [2, 2, 1] }, 'MALFORMED_FRAME', 'protocolVersions [2,2,1] repeats 2 (§6.1: no duplicates)')
badPayload('hello-version-zero', 'HELLO', { ...HELLO_OK, protocolVersions: [1, 0] }, 'MALFORMED_FRAME', 'protocolVersions [1,0] holds 0 (GUIDE §5: each ≥ 1)')
badPayload('hello-seventeen-versions', 'HELLO', { ...HELLO_OK, protocolVersions: Array.from({ length: 17 }, (_, i) => 17 - i) }, 'MALFORMED_FRAME',
  'protocolVersions has 17 entries (GUIDE §5: at most 16)')
badPayload('hello-versions-count-past-end', 'HELLO', Uint8Array.from([...encodePayload('HELLO', HELLO_OK).subarray(0, 11), ...enc((e) => encoding.writeVarUint(e, 1000000)), 0x01]), 'MALFORMED_FRAME',
  'protocolVersions count 1000000 with one byte left: over the cap and past the input, rejected without allocating')
badPayload('hello-nonce-15-bytes', 'HELLO', { ...HELLO_OK, connectionNonce: NONCE.subarray(0, 15) }, 'MALFORMED_FRAME', 'connectionNonce of 15 bytes (§6.1: exactly 16)')
badPayload('hello-nonce-17-bytes', 'HELLO', { ...HELLO_OK, connectionNonce: Uint8Array.from([...NONCE, 0]) }, 'MALFORMED_FRAME', 'connectionNonce of 17 bytes')
badPayload('hello-nonce-empty', 'HELLO', { ...HELLO_OK, connectionNonce: new Uint8Array(0) }, 'MALFORMED_FRAME', 'connectionNonce of 0 bytes')
badPayload('hello-ack-nonce-15-bytes', 'HELLO_ACK', { ...HELLO_ACK_OK, connectionNonce: NONCE.subarray(1) }, 'MALFORMED_FRAME',
  'HELLO_ACK returns a 15-byte connectionNonce (§6.2 echoes the 16-byte HELLO nonce)')

// §13 ERROR rules
badPayload('error-scope-2', 'ERROR', { scope: 2, code: 'INTERNAL_ERROR', fatal: true, retryable: true, safeMessage: 'x' }, 'MALFORMED_FRAME',
  'scope 2 (§13: 0 connection, 1 namespace)')
badPayload('error-namespace-scope-without-namespace-id', 'ERROR', { scope: 1, code: 'NAMESPACE_NOT_FOUND', fatal: true, retryable: true, safeMessage: 'x' },
  'MALFORMED_FRAME', 'scope 1 with namespaceId absent (§13: namespace scope must carry it)')
badPayload('error-connection-scope-with-namespace-id', 'ERROR', { ...err(0, 'INTERNAL_ERROR', { safeMessage: 'x' }), namespaceId: NS }, 'MALFORMED_FRAME',
  'scope 0 with namespaceId present (GUIDE §5: present exactly when scope = 1)')
badPayload('error-wrong-fatal', 'ERROR', { scope: 0, code: 'BAD_MAGIC', fatal: false, retryable: false, safeMessage: 'bad magic' }, 'MALFORMED_FRAME',
  'BAD_MAGIC with fatal false (§13.1: fatal yes)')
badPayload('error-wrong-retryable-config', 'ERROR', { scope: 0, code: 'FRAME_TOO_LARGE', fatal: true, retryable: false, safeMessage: 'frame too large' },
  'MALFORMED_FRAME', 'FRAME_TOO_LARGE with retryable false (§13.1: retryable config, so the wire bool is true)')
badPayload('error-wrong-retryable-no', 'ERROR', { scope: 1, code: 'SYNC_STATE_VIOLATION', fatal: true, retryable: true, namespaceId: NS, safeMessage: 'x' },
  'MALFORMED_FRAME', 'SYNC_STATE_VIOLATION with retryable true (§13.2: retryable no)')
badPayload('error-wrong-fatal-ack-timeout', 'ERROR', { scope: 1, code: 'ACK_TIMEOUT', fatal: true, retryable: true, namespaceId: NS, safeMessage: 'x' },
  'MALFORMED_FRAME', 'ACK_TIMEOUT with fatal true (§13.2: fatal no)')
badPayload('error-namespace-code-in-connection-scope', 'ERROR', { scope: 0, code: 'UPDATE_TOO_LARGE', fatal: true, retryable: true, safeMessage: 'x' },
  'MALFORMED_FRAME', 'UPDATE_TOO_LARGE is registered only in §13.2 (namespace) but scope is 0')
badPayload('error-connection-code-in-namespace-scope', 'ERROR', { scope: 1, code: 'BAD_MAGIC', fatal: true, retryable: false, namespaceId: NS, safeMessage: 'x' },
  'MALFORMED_FRAME', 'BAD_MAGIC is registered only in §13.1 (connection) but scope is 1')

// §7 rules
badPayload('open-ok-mode-2', 'OPEN_OK', { namespaceId: NS, mode: 2, replicationId: RID, replicationEpoch: 1 }, 'MALFORMED_FRAME',
  'mode 2 (§7.2: 0 bootstrap, 1 reconcile)')
badPayload('open-namespace-replica-without-identity', 'OPEN_NAMESPACE', { namespaceId: NS, hasLocalReplica: true }, 'MALFORMED_FRAME',
  'hasLocalReplica true with both identity fields absent (§7.1)')
badPayload('open-namespace-identity-without-replica', 'OPEN_NAMESPACE', { namespaceId: NS, hasLocalReplica: false, replicationId: RID, replicationEpoch: 1 },
  'MALFORMED_FRAME', 'hasLocalReplica false with both identity fields present (§7.1)')
badPayload('open-namespace-half-identity', 'OPEN_NAMESPACE', { namespaceId: NS, hasLocalReplica: true, replicationId: RID }, 'MALFORMED_FRAME',
  'replicationId present, replicationEpoch absent (§7.1: both or neither)')
badPayload('open-namespace-epoch-0', 'OPEN_NAMESPACE', { namespaceId: NS, hasLocalReplica: true, replicationId: RID, replicationEpoch: 0 }, 'MALFORMED_FRAME',
  'replicationEpoch 0 (§7.1: ≥ 1)')
badPayload('open-ok-epoch-0', 'OPEN_OK', { namespaceId: NS, mode: 0, replicationId: RID, replicationEpoch: 0 }, 'MALFORMED_FRAME',
  'replicationEpoch 0 (§1: epochs start at 1)')

// §10.3 UPDATE_CHUNK single-frame rules (CAP_CHUNKED_UPDATE negotiated)
badPayload('chunk-kind-3', 'UPDATE_CHUNK', { ...CHUNK_OK, kind: 3 }, 'MALFORMED_FRAME', 'kind 3 (§10.3: kind ∈ {0,1,2})')
badPayload('chunk-transfer-id-0', 'UPDATE_CHUNK', { ...CHUNK_OK, transferId: 0 }, 'MALFORMED_FRAME', 'transferId 0 (§10.3: 0 is illegal)')
badPayload('chunk-transfer-id-over-uint32', 'UPDATE_CHUNK', { ...CHUNK_OK, transferId: 2 ** 32 }, 'MALFORMED_FRAME', 'transferId 2^32 (§10.3: uint32)')
badPayload('chunk-index-equals-count', 'UPDATE_CHUNK', { ...CHUNK_OK, chunkIndex: 2, bytes: BIG_B }, 'MALFORMED_FRAME',
  'chunkIndex 2 with chunkCount 2 (§10.3: chunkIndex < chunkCount)')
badPayload('chunk-count-0', 'UPDATE_CHUNK', { ...CHUNK_OK, chunkCount: 0 }, 'MALFORMED_FRAME', 'chunkCount 0 (§10.3: ≥ 1)')
badPayload('chunk-empty-bytes', 'UPDATE_CHUNK', { ...CHUNK_OK, bytes: new Uint8Array(0) }, 'MALFORMED_FRAME', 'bytes empty (§10.3: non-empty)')
badPayload('chunk-bytes-over-total', 'UPDATE_CHUNK', { ...CHUNK_OK, totalBytes: BIG_A.length - 1 }, 'MALFORMED_FRAME',
  'bytes is one longer than totalBytes (§10.3: totalBytes ≥ bytes.byteLength)')
badPayload('chunk-total-bytes-over-uint32', 'UPDATE_CHUNK', { ...CHUNK_OK, totalBytes: 2 ** 32 }, 'MALFORMED_FRAME', 'totalBytes 2^32 (§10.3: uint32)')
badPayload('chunk-kind1-first-missing-binding', 'UPDATE_CHUNK',
  { kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: 64, bytes: Uint8Array.from(ascii(RID)) },
  'MALFORMED_FRAME',
  'kind 1, chunkIndex 0 without the binding block; bytes are 32 ASCII hex digits, so the decoder reads the bytes field as a valid ' +
  'replicationId and then finds no input for replicationEpoch (truncated)')
badPayload('chunk-kind2-first-missing-binding', 'UPDATE_CHUNK',
  { kind: 2, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: 12, bytes: UPDATE_HI_A }, 'MALFORMED_FRAME',
  'kind 2, chunkIndex 0 without syncRoundId: the decoder reads the bytes length 06 as syncRoundId, then 01 as a 1-byte bytes field, ' +
  'and finds 4 trailing bytes')
badPayload('chunk-kind0-with-binding', 'UPDATE_CHUNK', { ...CHUNK_OK, syncRoundId: 5 }, 'MALFORMED_FRAME',
  'kind 0, chunkIndex 0 carrying a syncRoundId: bytes then reads as 5 bytes and leaves trailing input (§10.3: no binding block for kind 0)')
badPayload('chunk-kind1-next-with-binding', 'UPDATE_CHUNK',
  { kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 1, chunkCount: 2, totalBytes: SNAPSHOT.length, replicationId: RID, replicationEpoch: 1, bytes: SNAPSHOT_B },
  'MALFORMED_FRAME', 'kind 1, chunkIndex 1 carrying a binding block: the replicationId length 0x20 is read as the bytes length, then trailing input')
badPayload('chunk-kind1-binding-epoch-0', 'UPDATE_CHUNK',
  { kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: SNAPSHOT.length, replicationId: RID, replicationEpoch: 0, bytes: SNAPSHOT_A },
  'MALFORMED_FRAME', 'binding block replicationEpoch 0 (≥ 1)')
badPayload('chunk-kind1-binding-bad-replication-id', 'UPDATE_CHUNK',
  { kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: SNAPSHOT.length, replicationId: RID.slice(2), replicationEpoch: 1, bytes: SNAPSHOT_A },
  'MALFORMED_FRAME', 'binding block replicationId of 30 hex digits')
badPayload('chunk-kind2-binding-round-over-uint32', 'UPDATE_CHUNK',
  { kind: 2, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 2, totalBytes: 12, syncRoundId: 2 ** 32, bytes: UPDATE_HI_A },
  'MALFORMED_FRAME', 'binding block syncRoundId 2^32 (uint32)')

// GUIDE §5 check 10: the Yjs-bytes size caps and their codes
badPayload('update-over-max-update-bytes', 'UPDATE', { namespaceId: NS, update: UPDATE_HI }, 'UPDATE_TOO_LARGE',
  'a 12-byte update with maxUpdateBytes 8 (§10.1)', { limits: { maxUpdateBytes: 8 } })
badPayload('chunk-over-max-update-bytes', 'UPDATE_CHUNK', { ...CHUNK_OK, chunkCount: 4 }, 'UPDATE_TOO_LARGE',
  `a ${BIG_A.length}-byte kind 0 chunk with maxUpdateBytes 16 (§10.3: bytes ≤ maxUpdateBytes, else UPDATE_TOO_LARGE)`, { limits: { maxUpdateBytes: 16 } })
badPayload('chunk-kind1-over-max-update-bytes', 'UPDATE_CHUNK',
  { kind: 1, namespaceId: NS, transferId: 1, chunkIndex: 0, chunkCount: 8, totalBytes: SNAPSHOT.length, replicationId: RID, replicationEpoch: 1, bytes: SNAPSHOT_A },
  'UPDATE_TOO_LARGE', `a ${SNAPSHOT_A.length}-byte kind 1 chunk with maxUpdateBytes 16 (§10.3 codec rule; GUIDE §5: a chunk over maxUpdateBytes is UPDATE_TOO_LARGE whatever its kind)`,
  { limits: { maxUpdateBytes: 16 } })
badPayload('sync-step2-over-max-sync-diff-bytes', 'SYNC_STEP2', { namespaceId: NS, syncRoundId: 1, relatedStep1Sequence: 4, update: UPDATE_HI }, 'SYNC_DIFF_TOO_LARGE',
  'a 12-byte diff with maxSyncDiffBytes 8 (§9.2)', { limits: { maxSyncDiffBytes: 8 } })
badPayload('bootstrap-over-max-bootstrap-bytes', 'BOOTSTRAP_SNAPSHOT', { namespaceId: NS, replicationId: RID, replicationEpoch: 1, snapshot: SNAPSHOT },
  'BOOTSTRAP_TOO_LARGE', `a ${SNAPSHOT.length}-byte snapshot with maxBootstrapBytes 64 (§8.1)`, { limits: { maxBootstrapBytes: 64 } })

// ---------------------------------------------------------------------------------------
// Self-check and output

const HEX = /^(?:[0-9a-f]{2})*$/
const names = new Set()
const unique = (name) => {
  if (names.has(name)) throw new Error(`duplicate vector name ${name}`)
  names.add(name)
}
const sameJSON = (a, b) => JSON.stringify(a) === JSON.stringify(b)
const header = (bytes) => {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  return { magic: toHex(bytes.subarray(0, 4)), envelopeVersion: bytes[4], messageType: bytes[5], flags: v.getUint16(6),
    sequence: v.getUint32(8), payloadLength: v.getUint32(12), reserved: v.getUint32(16) }
}
const cleanEnvelope = (bytes, limits, chunked) => {
  if (bytes.length < HEADER_BYTES || bytes.length > limits.maxFrameBytes) return false
  const h = header(bytes)
  const known = Object.values(MESSAGE_TYPES).includes(h.messageType) && (h.messageType !== 0x42 || chunked)
  return h.magic === '4e4d4352' && h.envelopeVersion === 1 && h.flags === 0 && h.reserved === 0 && known &&
    HEADER_BYTES + h.payloadLength === bytes.length
}

const frames = positives.map(({ name, chunked, decodeOnly, frame }) => {
  unique(name)
  checkRules(frame.type, frame.payload)
  if ((frame.type === 'UPDATE_CHUNK') !== chunked) throw new Error(`${name}: chunked must be set exactly for UPDATE_CHUNK`)
  if (!(frame.sequence >= 1 && frame.sequence <= MAX_UINT32)) throw new Error(`${name}: sequence out of range`)
  const bytes = encodeFrame(frame)
  const h = header(bytes)
  if (!cleanEnvelope(bytes, DEFAULT_LIMITS, chunked) || h.messageType !== MESSAGE_TYPES[frame.type] || h.sequence !== frame.sequence) {
    throw new Error(`${name}: envelope self-check failed`)
  }
  const json = frameJSON(frame)
  const back = frameJSON({ type: frame.type, sequence: h.sequence, payload: decodePayload(frame.type, bytes.subarray(HEADER_BYTES)) })
  if (!sameJSON(json, back)) throw new Error(`${name}: payload does not read back as written`)
  const hex = toHex(bytes)
  if (!HEX.test(hex)) throw new Error(`${name}: hex is not lowercase`)
  const v = { name, chunked, frame: json, hex }
  if (decodeOnly) v.decodeOnly = true
  return v
})

const badFrames = bad.map(({ name, stage, bytes, chunked, limits, error, note }) => {
  unique(name)
  if (!note) throw new Error(`${name}: note missing`)
  if (stage === 'payload' && !cleanEnvelope(bytes, limits, chunked)) throw new Error(`${name}: envelope must pass checks 1–8`)
  if (stage === 'envelope' && cleanEnvelope(bytes, limits, chunked)) throw new Error(`${name}: envelope passes checks 1–8`)
  const hex = toHex(bytes)
  if (!HEX.test(hex)) throw new Error(`${name}: hex is not lowercase`)
  return { name, hex, chunked, ...limits, error, note }
})

for (const m of Object.keys(MESSAGE_TYPES)) {
  if (!frames.some((v) => v.frame.type === m)) throw new Error(`no positive vector for ${m}`)
}

const GENERATOR = 'testdata/golden/gen/gen.mjs'
const write = (file, doc) => writeFileSync(here(file), JSON.stringify(doc, null, 2) + '\n')
write('../frames.json', { generator: GENERATOR, lib0: LIB0_VERSION, vectors: frames })
write('../bad-frames.json', { generator: GENERATOR, lib0: LIB0_VERSION, defaults: DEFAULT_LIMITS, vectors: badFrames })
console.log(`frames.json: ${frames.length} vectors; bad-frames.json: ${badFrames.length} vectors`)
