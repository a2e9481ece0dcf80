// Relay-benchmark adapter "nomicore-hocuspocus": the Go Nomicore hub's Hocuspocus endpoint
// (GET /v1/hocuspocus on the client listener), driven by the harness's raw client with the
// Hocuspocus framing — the same client and the same frames the harness sends to
// @hocuspocus/server ("hocuspocus"), except that the document name is the namespace id the
// hub made for the harness's document and the Auth frame carries the hub's client token.
// Every client has a socket of its own, as in the harness's "hocuspocus" runs. The hub
// acknowledges an update (SyncStatus) and relays it to the document's other clients once it
// is durable on disk; @hocuspocus/server keeps documents in memory only.
// Overlaid onto a copy of the relay harness by scripts/relay/run.sh and
// scripts/benchrelay/bench.sh (each registers it as SERVERS['nomicore-hocuspocus']).
//
// Uses only the hub's CLI and admin API:
//   hub token add --data DIR --client bench                (before serve; prints the token)
//   hub serve --listen … --admin-listen 127.0.0.1:A --client-listen 127.0.0.1:P --data DIR
//   POST http://127.0.0.1:A/v1/namespaces  → {"namespaceId"}   (one per document)
//   ws://127.0.0.1:P/v1/hocuspocus                          (Hocuspocus framing)
// The hub binary comes from HUB_BIN.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { spawnSync } from 'node:child_process'
import WebSocket from 'ws'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as syncProtocol from 'y-protocols/sync'
import { freePort } from './proc.mjs'
import { PROTOCOLS, MSG_SYNC, MSG_AWARENESS, MSG_IGNORE } from './adapters.mjs'
import { SyncClient } from './client.mjs'

let adapters = 0 // made so far

// The adapter; its addressOf maps the harness's document name to the address its frames
// carry (the namespace id).
export const nomicoreHocuspocus = () => {
  const bin = process.env.HUB_BIN ? path.resolve(process.env.HUB_BIN) : null
  let dataDir = null
  let adminPort = 0
  let replPort = 0
  let token = ''
  const namespaces = new Map() // the harness's document name → namespace id
  const nsOf = (doc) => {
    const ns = namespaces.get(doc)
    if (!ns) throw new Error(`no namespace for ${doc}`)
    return ns
  }
  const admin = async (method, p, body) => {
    const res = await fetch(`http://127.0.0.1:${adminPort}${p}`, {
      method, signal: AbortSignal.timeout(10000),
      ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {})
    })
    return { status: res.status, text: await res.text() }
  }
  // The Hocuspocus framing of the harness, with the namespace id as the document name and
  // the client token in the Auth frame; a protocol of each adapter made (its namespaces).
  const protocol = `nomicore-hocuspocus-${++adapters}`
  PROTOCOLS[protocol] = {
    writeHeader (enc, docName) {
      encoding.writeVarString(enc, nsOf(docName))
    },
    onOpen (client) {
      const enc = encoding.createEncoder()
      encoding.writeVarString(enc, nsOf(client.docName))
      encoding.writeVarUint(enc, 2) // Auth
      encoding.writeVarUint(enc, 0) // Token
      encoding.writeVarString(enc, token)
      client.rawSend(encoding.toUint8Array(enc))
    },
    readType (dec, client) {
      decoding.readVarString(dec)
      const t = decoding.readVarUint(dec)
      switch (t) {
        case 0: // Sync
        case 4: // SyncReply
          return MSG_SYNC
        case 1:
          return MSG_AWARENESS
        case 2: {
          const sub = decoding.readVarUint(dec)
          if (sub === 1) client.fail(new Error('nomicore-hocuspocus: permission denied: ' + decoding.readVarString(dec)))
          return MSG_IGNORE
        }
        default: // 8 SyncStatus, 5 Stateless, 7 Close, 9 Ping
          return MSG_IGNORE
      }
    }
  }
  return {
    protocol,
    serverNodeLabel: 'native (Go hub, Hocuspocus endpoint)',
    version: () => {
      if (!bin) return 'HUB_BIN not set'
      const h = crypto.createHash('sha256').update(fs.readFileSync(bin)).digest('hex')
      return `hub binary ${bin} (sha256 ${h.slice(0, 16)}), Hocuspocus endpoint`
    },
    peerCount: () => 0,
    async beforeStart () {
      if (!bin) throw new Error('nomicore-hocuspocus needs HUB_BIN (a built Go hub binary)')
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'relay-hocus-'))
      adminPort = await freePort()
      replPort = await freePort()
      const r = spawnSync(bin, ['token', 'add', '--data', dataDir, '--client', 'bench'], { timeout: 20000, stdio: ['ignore', 'pipe', 'pipe'] })
      if (r.status !== 0) throw new Error(`hub token add --client: exit ${r.status} ${String(r.stderr).slice(0, 300)}`)
      token = String(r.stdout).trim()
    },
    // The harness waits for TCP on `port`: the client listener.
    start: (port) => ({
      cmd: bin,
      args: ['serve', '--listen', `127.0.0.1:${replPort}`, '--admin-listen', `127.0.0.1:${adminPort}`,
        '--client-listen', `127.0.0.1:${port}`, '--max-clients', '4096', '--data', dataDir, '--log-level', 'warn',
        // Every client of the harness presents the one token: one user with hundreds of
        // sockets, each sending as fast as the window lets it — far beyond an editor in
        // normal use, which the per-user and per-connection limits are made for.
        '--max-connections-per-user', '4096', '--client-messages-per-second', '1000000',
        '--client-bytes-per-second', '1073741824', '--awareness-updates-per-second', '1000000'],
      env: {}
    }),
    async afterStart (srv) {
      const deadline = Date.now() + 20000
      for (;;) {
        if (srv.exited) throw new Error(`hub exited: ${JSON.stringify(srv.exited)} ${srv.log.join('').slice(-800)}`)
        try { if ((await admin('GET', '/readyz')).status === 200) return } catch {}
        if (Date.now() > deadline) throw new Error('hub admin API not ready')
        await new Promise(resolve => setTimeout(resolve, 50))
      }
    },
    async prepareDocs (names) {
      for (const name of names) {
        const r = await admin('POST', '/v1/namespaces', { owner: 'default' })
        const j = JSON.parse(r.text)
        if (r.status !== 201 || !/^ns-[0-9a-f]{32}$/.test(j.namespaceId || '')) throw new Error(`POST /v1/namespaces: ${r.status} ${r.text.slice(0, 200)}`)
        namespaces.set(name, j.namespaceId)
      }
    },
    // One socket per client; the document is named inside each frame.
    url: (port, _doc) => `ws://127.0.0.1:${port}/v1/hocuspocus`,
    addressOf: nsOf,
    cleanup () {
      if (dataDir) try { fs.rmSync(dataDir, { recursive: true, force: true }) } catch {}
    }
  }
}

// Many documents over one socket, as HocuspocusProviderWebsocket carries them: the harness
// client k of every document shares socket k (in multidoc, 2 sockets of 200 documents
// each; in fanout, one document per socket as before). muxSocket is one such socket; a
// MuxClient is the harness's SyncClient whose frames go through it, the socket routing each
// frame it receives to the client of its address.
class MuxSocket {
  constructor (url) {
    this.url = url
    this.ws = null
    this.clients = new Map() // address → MuxClient
    this.opened = null
  }

  open () {
    if (this.opened) return this.opened
    this.opened = new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, { perMessageDeflate: false, maxPayload: 512 * 1024 * 1024 })
      ws.binaryType = 'nodebuffer'
      this.ws = ws
      ws.on('open', resolve)
      ws.on('error', (e) => { reject(e); for (const c of this.clients.values()) c.fail(e) })
      ws.on('close', () => {
        for (const c of this.clients.values()) if (!c._closing) c.fail(new Error(`shared socket closed (${c.docName})`))
      })
      ws.on('message', (data) => {
        const addr = decoding.readVarString(decoding.createDecoder(data))
        const c = this.clients.get(addr)
        if (c) c._onMessage(data)
      })
    })
    return this.opened
  }
}

// The class is made on first use: this module and the harness's client.mjs import each
// other through adapters.mjs.
let MuxClient = null
const muxClient = () => (MuxClient ??= class extends SyncClient {
  constructor (o, sock, address) {
    super(o)
    this.sock = sock
    this.address = address
    sock.clients.set(address, this)
  }

  connect (timeoutMs = 30000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`sync timeout ${this.url} ${this.docName}`)), timeoutMs)
      this._syncWaiters = { resolve: () => { clearTimeout(timer); resolve() }, reject: (e) => { clearTimeout(timer); reject(e) } }
      this.sock.open().then(() => {
        this.ws = this.sock.ws
        this.proto.onOpen(this)
        this.sendSync(enc => syncProtocol.writeSyncStep1(enc, this.doc))
      }, (e) => this.fail(e))
    })
  }

  close () {
    this._closing = true
    this.sock.clients.delete(this.address)
    if (this.sock.clients.size === 0 && this.sock.ws) this.sock.ws.close()
  }
})

// withSharedSockets gives an adapter of Hocuspocus framing a makeClient that puts harness
// client k of every document on socket k. The port comes from the adapter's start.
export const withSharedSockets = (spec, addressOf) => {
  let port = 0
  const sockets = new Map() // member → MuxSocket
  return {
    ...spec,
    version: () => spec.version() + ', many documents per socket',
    start: (p) => { port = p; return spec.start(p) },
    makeClient: ({ docName, clientID, member }) => {
      const url = spec.url(port, docName)
      if (!sockets.has(member)) sockets.set(member, new MuxSocket(url))
      return new (muxClient())({ url, docName, protocol: spec.protocol, clientID }, sockets.get(member), addressOf(docName))
    }
  }
}
